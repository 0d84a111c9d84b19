// tierckpt_ext.cc — the nanobind module tierckpt._tierckpt: a translation of
// include/tierckpt/client.h into Python, and nothing more.
//
// Rules (docs/python.md, "The native module"):
//   * Every Status becomes a Python exception in one function, Raise():
//     kNotFound → FileNotFoundError, kAlreadyExists → FileExistsError,
//     kPermissionDenied → PermissionError, kInvalidArgument → ValueError,
//     kTimeout → TimeoutError, kUnavailable → ConnectionError,
//     kCorruption → tierckpt.errors.CorruptionError (an OSError), anything
//     else → tierckpt.errors.TierckptError (a RuntimeError). The exception
//     carries the numeric status code as `.code`.
//   * The core's tables and rules are exported, not copied: status_codes()
//     (the TIERCKPT_STATUS_CODES X-macro), MAX_STEP, validate_namespace,
//     parse_step and validate_object_name (src/common/names.h), so the
//     Python package holds no second copy of them.
//   * The GIL is released around every call that talks to the agent or
//     touches object bytes (Released()).
//   * WritableObject and ObjectView export the buffer protocol over their
//     shared-memory mapping (writable / read-only), so memoryview() and
//     torch.frombuffer() see the bytes in place, without a copy. An exported
//     buffer keeps its Python object, hence the mapping, alive. A
//     WritableObject cannot be sealed while a buffer over it is exported,
//     and exports no new buffer once sealed (sealed bytes are immutable).
// Decisions (which objects, sizes, layouts, fallbacks) live in the Python
// package, never here.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/names.h"
#include "tierckpt/client.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace nb = nanobind;

namespace tierckpt::python {
namespace {

// ---- Status → Python exception (the one place) ----

// A new reference to tierckpt.errors.<name>, or to fallback when the package
// is not importable (the extension loaded on its own).
PyObject* PackageException(const char* name, PyObject* fallback) {
  PyObject* module = PyImport_ImportModule("tierckpt.errors");
  if (module == nullptr) {
    PyErr_Clear();
    Py_INCREF(fallback);
    return fallback;
  }
  PyObject* cls = PyObject_GetAttrString(module, name);
  Py_DECREF(module);
  if (cls == nullptr) {
    PyErr_Clear();
    Py_INCREF(fallback);
    return fallback;
  }
  return cls;
}

// A new reference to the Python exception class for code.
PyObject* ExceptionClass(Code code) {
  PyObject* builtin = nullptr;
  switch (code) {
    case Code::kNotFound: builtin = PyExc_FileNotFoundError; break;
    case Code::kAlreadyExists: builtin = PyExc_FileExistsError; break;
    case Code::kPermissionDenied: builtin = PyExc_PermissionError; break;
    case Code::kInvalidArgument: builtin = PyExc_ValueError; break;
    case Code::kTimeout: builtin = PyExc_TimeoutError; break;
    case Code::kUnavailable: builtin = PyExc_ConnectionError; break;
    case Code::kCorruption: return PackageException("CorruptionError", PyExc_OSError);
    default: return PackageException("TierckptError", PyExc_RuntimeError);
  }
  Py_INCREF(builtin);
  return builtin;
}

// Sets the Python error for a non-ok status and throws nb::python_error.
// Precondition: the GIL is held.
[[noreturn]] void Raise(const Status& status) {
  PyObject* cls = ExceptionClass(status.code());
  const std::string text = status.ToString();
  PyObject* message = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  PyObject* exc = message != nullptr ? PyObject_CallOneArg(cls, message) : nullptr;
  Py_XDECREF(message);
  if (exc != nullptr) {
    PyObject* code = PyLong_FromUnsignedLong(static_cast<unsigned long>(status.code()));
    if (code == nullptr || PyObject_SetAttrString(exc, "code", code) != 0) PyErr_Clear();
    Py_XDECREF(code);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
  Py_DECREF(cls);
  throw nb::python_error();
}

void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Unwrap(Result<T>&& result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

// Runs f (which must not touch Python objects) without the GIL.
template <typename F>
auto Released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// ---- The core's tables and rules ----

// (name, number, description) of every status code, from the one table.
std::vector<std::tuple<std::string, uint32_t, std::string>> StatusCodes() {
  return {
#define TIERCKPT_STATUS_ROW(name, number, desc) {#name, number, desc},
      TIERCKPT_STATUS_CODES(TIERCKPT_STATUS_ROW)
#undef TIERCKPT_STATUS_ROW
  };
}

// ---- Buffers passed in from Python ----

// A Py_buffer held for the duration of a call (RAII).
class HeldBuffer {
 public:
  HeldBuffer(nb::handle object, bool writable) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) throw nb::python_error();
    held_ = true;
  }
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  HeldBuffer(HeldBuffer&& o) noexcept : view_(o.view_), held_(std::exchange(o.held_, false)) {}
  HeldBuffer& operator=(HeldBuffer&&) = delete;

  void* data() const { return view_.buf; }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// ---- Handles over shared memory ----

// A WritableObject plus the number of buffers exported over it.
struct PyWritable {
  WritableObject object;
  uint64_t index = 0;  // the n create_next_object took (0 for create_object)
  int exports = 0;
  bool sealed = false;
};

// An ObjectView (read-only; its mapping lives as long as this object).
struct PyView {
  ObjectView view;
};

int WritableGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  PyWritable* w = nb::inst_ptr<PyWritable>(self);
  if (w->sealed) {
    view->obj = nullptr;
    PyErr_Format(PyExc_BufferError, "object %s is sealed: its bytes are immutable and no longer mapped here",
                 w->object.name().c_str());
    return -1;
  }
  if (PyBuffer_FillInfo(view, self, w->object.data(), static_cast<Py_ssize_t>(w->object.size()),
                        /*readonly=*/0, flags) != 0) {
    return -1;
  }
  ++w->exports;
  return 0;
}

void WritableReleaseBuffer(PyObject* self, Py_buffer*) { --nb::inst_ptr<PyWritable>(self)->exports; }

int ViewGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  PyView* v = nb::inst_ptr<PyView>(self);
  // The mapping is PROT_READ: PyBuffer_FillInfo refuses PyBUF_WRITABLE.
  return PyBuffer_FillInfo(view, self, const_cast<uint8_t*>(v->view.data()),
                           static_cast<Py_ssize_t>(v->view.size()), /*readonly=*/1, flags);
}

PyType_Slot kWritableSlots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(WritableGetBuffer)},
                                {Py_bf_releasebuffer, reinterpret_cast<void*>(WritableReleaseBuffer)},
                                {0, nullptr}};
PyType_Slot kViewSlots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(ViewGetBuffer)}, {0, nullptr}};

nb::object MemoryViewOf(nb::handle self) {
  PyObject* mv = PyMemoryView_FromObject(self.ptr());
  if (mv == nullptr) throw nb::python_error();
  return nb::steal(mv);
}

std::chrono::milliseconds SecondsToMs(double seconds) {
  if (seconds < 0) Raise(InvalidArgument("timeout must be >= 0 seconds (0 waits forever), got " +
                                         std::to_string(seconds)));
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

// ---- The Client ----

std::unique_ptr<Client> Connect(const std::string& socket_path, const std::string& client_name, int copy_threads,
                                uint64_t mapping_cache_bytes, const std::string& writer_id) {
  ClientOptions options;
  options.socket_path = socket_path;
  options.client_name = client_name;
  options.writer_id = writer_id;
  options.copy_threads = copy_threads;
  options.mapping_cache_bytes = mapping_cache_bytes;
  return Unwrap(Released([&] { return Client::Connect(options); }));
}

std::unique_ptr<PyWritable> CreateObject(Client& c, const std::string& ns, uint64_t step, const std::string& name,
                                         uint64_t size) {
  auto w = std::make_unique<PyWritable>();
  w->object = Unwrap(Released([&] { return c.CreateObject(ns, step, name, size); }));
  return w;
}

std::unique_ptr<PyWritable> CreateNextObject(Client& c, const std::string& ns, uint64_t step,
                                             const std::string& prefix, uint64_t first, const std::string& suffix,
                                             uint64_t size, bool begin_save) {
  auto w = std::make_unique<PyWritable>();
  const ObjectNamePattern pattern{prefix, first, suffix};
  w->object = Unwrap(Released([&] {
    return begin_save ? c.BeginSaveCreateNext(ns, step, pattern, size, &w->index)
                      : c.CreateNextObject(ns, step, pattern, size, &w->index);
  }));
  return w;
}

void Seal(Client& c, PyWritable& w, const std::string& checksum) {
  if (w.exports > 0) {
    PyErr_Format(PyExc_BufferError,
                 "object %s still has %d buffer(s) exported (memoryviews or tensors over its memory); "
                 "release them before sealing it",
                 w.object.name().c_str(), w.exports);
    throw nb::python_error();
  }
  Check(Released([&] { return c.Seal(w.object, checksum); }));
  w.sealed = true;
}

void WriteObject(Client& c, const std::string& ns, uint64_t step, const std::string& name, nb::handle data) {
  HeldBuffer buffer(data, /*writable=*/false);
  Check(Released([&] { return c.WriteObject(ns, step, name, buffer.data(), buffer.size()); }));
}

void WriteObjects(Client& c, const std::string& ns, uint64_t step,
                  const std::vector<std::tuple<std::string, nb::handle>>& objects) {
  std::vector<HeldBuffer> buffers;
  std::vector<ObjectSource> sources;
  buffers.reserve(objects.size());
  for (const auto& [name, data] : objects) {
    buffers.emplace_back(data, /*writable=*/false);
    sources.push_back({name, buffers.back().data(), buffers.back().size()});
  }
  Check(Released([&] { return c.WriteObjects(ns, step, sources); }));
}

// verify_reads' mode name and attest_max_age (seconds) as a ReadVerify.
ReadVerify ToReadVerify(const std::string& mode, double max_age_s) {
  ReadVerify v;
  v.mode = Unwrap(ParseReadVerifyMode(mode));
  if (!(max_age_s >= 0)) {
    Raise(InvalidArgument("attest_max_age must be >= 0 seconds, got " + std::to_string(max_age_s)));
  }
  v.max_age = std::chrono::milliseconds(static_cast<int64_t>(max_age_s * 1000.0));
  return v;
}

void ReadObjects(Client& c, const std::string& ns, uint64_t step,
                 const std::vector<std::tuple<std::string, nb::handle>>& objects, const std::string& verify,
                 double attest_max_age_s) {
  const ReadVerify how = ToReadVerify(verify, attest_max_age_s);
  std::vector<HeldBuffer> buffers;
  std::vector<ObjectDest> dests;
  buffers.reserve(objects.size());
  for (const auto& [name, data] : objects) {
    buffers.emplace_back(data, /*writable=*/true);
    dests.push_back({name, buffers.back().data(), buffers.back().size()});
  }
  Check(Released([&] { return c.ReadObjects(ns, step, dests, how); }));
}

Manifest Commit(Client& c, const std::string& ns, uint64_t step, uint32_t world_size, bool persist,
                const std::vector<std::string>& expected_objects, const std::vector<std::string>& members) {
  CommitOptions options;
  options.world_size = world_size;
  options.persist = persist;
  options.expected_objects = expected_objects;
  options.members = members;
  return Unwrap(Released([&] { return c.Commit(ns, step, options); }));
}

std::unique_ptr<PyView> Open(Client& c, const std::string& ns, uint64_t step, const std::string& name) {
  auto v = std::make_unique<PyView>();
  v->view = Unwrap(Released([&] { return c.Open(ns, step, name); }));
  return v;
}

// Client::OpenVerified or Client::OpenToCopy (Open), the verify mode parsed.
template <Result<ObjectView> (Client::*Open)(std::string_view, uint64_t, std::string_view, const ReadVerify&)>
std::unique_ptr<PyView> OpenView(Client& c, const std::string& ns, uint64_t step, const std::string& name,
                                 const std::string& verify, double attest_max_age_s) {
  const ReadVerify how = ToReadVerify(verify, attest_max_age_s);
  auto v = std::make_unique<PyView>();
  v->view = Unwrap(Released([&] { return (c.*Open)(ns, step, name, how); }));
  return v;
}

// runs: a C-contiguous buffer of packed native uint64 triples (offset, address, size), e.g.
// array.array("Q", ...): the CopyRun layout. Translated, not interpreted: CopyIn/CopyOut check them.
std::pair<const CopyRun*, size_t> RunsOf(const HeldBuffer& runs) {
  if (runs.size() % sizeof(CopyRun) != 0) {
    throw nb::value_error(("copy runs must be packed uint64 triples (offset, address, size): " +
                           std::to_string(runs.size()) + " bytes is not a multiple of 24")
                              .c_str());
  }
  return {static_cast<const CopyRun*>(runs.data()), runs.size() / sizeof(CopyRun)};
}

void CopyIntoObject(const PyWritable& w, nb::handle runs, int threads) {
  if (w.sealed) {
    throw nb::value_error(("object " + w.object.name() + " is sealed: its bytes are immutable").c_str());
  }
  HeldBuffer held(runs, /*writable=*/false);
  const auto [data, count] = RunsOf(held);
  Check(Released([&] { return CopyIn(w.object, data, count, threads); }));
}

void CopyOutOfView(const PyView& v, nb::handle runs, int threads) {
  HeldBuffer held(runs, /*writable=*/false);
  const auto [data, count] = RunsOf(held);
  Check(Released([&] { return CopyOut(v.view, data, count, threads); }));
}

void CopyTo(const PyView& v, nb::handle destination) {
  HeldBuffer buffer(destination, /*writable=*/true);
  Check(Released([&] { return v.view.CopyTo(buffer.data(), buffer.size()); }));
}

}  // namespace
}  // namespace tierckpt::python

NB_MODULE(_tierckpt, m) {
  using namespace tierckpt;          // NOLINT(build/namespaces): module glue only
  using namespace tierckpt::python;  // NOLINT(build/namespaces)

  m.doc() = "tierckpt._tierckpt: the C++ client of tierckptd (include/tierckpt/client.h), translated.";
  // Connections cached per process (tierckpt.agent) and results kept by
  // writers legitimately outlive module teardown at interpreter exit.
  nb::set_leak_warnings(false);

  m.def("status_codes", &StatusCodes,
        "(name, number, description) of every status code: the TIERCKPT_STATUS_CODES table of "
        "include/tierckpt/status.h.");
  m.attr("MAX_STEP") = kMaxStep;
  m.def("validate_namespace", [](const std::string& ns) { Check(ValidateNamespace(ns)); }, nb::arg("ns"),
        "ValueError unless ns is a namespace: [A-Za-z0-9_.-]{1,128}, not '.' or '..' (src/common/names.h).");
  m.def("parse_step", [](const std::string& text) { return Unwrap(ParseStep(text)); }, nb::arg("text"),
        "The step a decimal text names, in [0, MAX_STEP]; ValueError otherwise (src/common/names.h).");
  m.def("validate_object_name", [](const std::string& name) { Check(ValidateObjectName(name)); }, nb::arg("name"),
        "ValueError unless name is an object name a client may create (src/common/names.h).");

  m.def("default_socket_path", &DefaultSocketPath,
        "$TIERCKPT_SOCKET, else $XDG_RUNTIME_DIR/tierckpt/agent.sock, else /run/tierckpt/agent.sock for root, "
        "else /tmp/tierckpt-<uid>/agent.sock.");

  nb::class_<ObjectEntry>(m, "ObjectEntry")
      .def_ro("name", &ObjectEntry::name)
      .def_ro("size", &ObjectEntry::size)
      .def_ro("checksum", &ObjectEntry::checksum)
      .def_ro("node", &ObjectEntry::node)
      .def("__repr__", [](const ObjectEntry& e) {
        return "ObjectEntry(name='" + e.name + "', size=" + std::to_string(e.size) + ", checksum='" + e.checksum +
               "')";
      });

  m.def("names_digest", [](const std::vector<std::string>& names) { return SpanNamesDigest(names); },
        nb::arg("names"),
        "The SpanSummary.names_digest of these names (any order): what a commit spanning nodes reports of the "
        "names it committed.");

  nb::class_<SpanSummary>(m, "SpanSummary")
      .def_ro("parts", &SpanSummary::parts)
      .def_ro("objects", &SpanSummary::objects)
      .def_ro("bytes", &SpanSummary::bytes)
      .def_ro("names_digest", &SpanSummary::names_digest)
      .def("__repr__", [](const SpanSummary& s) {
        return "SpanSummary(parts=" + std::to_string(s.parts) + ", objects=" + std::to_string(s.objects) +
               ", bytes=" + std::to_string(s.bytes) + ")";
      });

  nb::class_<MemberRef>(m, "MemberRef")
      .def_ro("count", &MemberRef::count)
      .def_ro("index", &MemberRef::index)
      .def_ro("digest", &MemberRef::digest)
      .def_ro("coordinator", &MemberRef::coordinator)
      .def("__repr__", [](const MemberRef& r) {
        return "MemberRef(count=" + std::to_string(r.count) + ", index=" + std::to_string(r.index) +
               ", coordinator='" + r.coordinator + "')";
      });

  nb::class_<Manifest>(m, "Manifest")
      .def_ro("ns", &Manifest::ns)
      .def_ro("step", &Manifest::step)
      .def_ro("world_size", &Manifest::world_size)
      .def_ro("created_unix_ms", &Manifest::created_unix_ms)
      .def_ro("node", &Manifest::node)
      .def_ro("members", &Manifest::members)
      .def_ro("member_ref", &Manifest::member_ref)
      .def_ro("objects", &Manifest::objects)
      .def_ro("checksums_pending", &Manifest::checksums_pending)
      .def_ro("span", &Manifest::span)
      .def_prop_ro("total_bytes", &Manifest::TotalBytes)
      .def("to_json", &Manifest::ToJson)
      .def("__repr__", [](const Manifest& mf) {
        return "Manifest(ns='" + mf.ns + "', step=" + std::to_string(mf.step) +
               ", objects=" + std::to_string(mf.objects.size()) + ", bytes=" + std::to_string(mf.TotalBytes()) + ")";
      });

  nb::class_<StepSummary>(m, "StepSummary")
      .def_ro("ns", &StepSummary::ns)
      .def_ro("step", &StepSummary::step)
      .def_ro("bytes", &StepSummary::bytes)
      .def_ro("objects", &StepSummary::objects)
      .def_ro("memory", &StepSummary::memory)
      .def_ro("durable", &StepSummary::durable)
      .def("__repr__", [](const StepSummary& s) {
        return "StepSummary(ns='" + s.ns + "', step=" + std::to_string(s.step) + ", memory='" + s.memory +
               "', durable='" + s.durable + "')";
      });

  nb::class_<PyWritable>(m, "WritableObject", nb::type_slots(kWritableSlots),
                         "A created object: fill its buffer (memoryview(obj), obj.data, torch.frombuffer(obj)), "
                         "release every view, then Client.seal(obj).")
      .def_prop_ro("name", [](const PyWritable& w) { return w.object.name(); })
      .def_prop_ro("size", [](const PyWritable& w) { return w.object.size(); })
      .def_prop_ro("index", [](const PyWritable& w) { return w.index; },
                   "The n of the name <prefix><n><suffix> that create_next_object took (0 otherwise).")
      .def_prop_ro("sealed", [](const PyWritable& w) { return w.sealed; })
      .def_prop_ro("exports", [](const PyWritable& w) { return w.exports; })
      .def_prop_ro("data", &MemoryViewOf, "A writable memoryview over the object's shared memory.")
      .def("copy_in", &CopyIntoObject, nb::arg("runs"), nb::arg("threads") = 1,
           "Copies each run (packed native uint64 triples offset, address, size: array('Q')) from the "
           "caller's memory at address to offset in the object, threads at a time (tierckpt::CopyIn). The "
           "caller guarantees each address holds size readable bytes; runs past the object are refused.");

  nb::class_<PyView>(m, "ObjectView", nb::type_slots(kViewSlots),
                     "A committed object mapped read-only from the memory tier.")
      .def_prop_ro("size", [](const PyView& v) { return v.view.size(); })
      .def_prop_ro("checksum", [](const PyView& v) { return v.view.checksum(); })
      .def_prop_ro("repaired", [](const PyView& v) { return v.view.repaired(); },
                   "\"\" unless the agent replaced a corrupt copy before handing out this one: what it found "
                   "and where it read the step from instead (Client.open_verified).")
      .def_prop_ro("verified_age_s",
                   [](const PyView& v) -> nb::object {
                     const auto age = v.view.verified_age();
                     if (!age.has_value()) return nb::none();
                     return nb::float_(static_cast<double>(age->count()) / 1000.0);
                   },
                   "Seconds since the agent last verified these bytes when it handed them out; None if never.")
      .def_prop_ro("data", &MemoryViewOf, "A read-only memoryview over the object's shared memory.")
      .def("verify", [](const PyView& v) { Check(Released([&] { return v.view.Verify(); })); },
           "Recomputes the checksum; CorruptionError naming the object on mismatch.")
      .def("unchanged", [](const PyView& v) { Check(v.view.Unchanged()); },
           "CorruptionError if the file under this view was recycled (its step dropped) since it was opened: "
           "call it after using the bytes (ObjectView::Unchanged).")
      .def("copy_out", &CopyOutOfView, nb::arg("runs"), nb::arg("threads") = 1,
           "Copies each run (packed uint64 triples offset, address, size) from offset in the object to the "
           "caller's memory at address, threads at a time (tierckpt::CopyOut). A view of open_to_copy whose "
           "hash is due is hashed whole in the same pass, on one thread: CorruptionError after the copy when "
           "it does not match. Any other view is copied without verifying: open it verified. Call "
           "unchanged() afterwards either way.")
      .def_prop_ro("hash_due", [](const PyView& v) { return v.view.hash_due(); },
                   "True for a view of open_to_copy no copy_out has verified yet: read nothing through data "
                   "until one has.")
      .def_prop_ro("name", [](const PyView& v) { return v.view.name(); })
      .def("copy_to", &CopyTo, nb::arg("destination"),
           "Copies into a writable buffer of at least size bytes, verifying the checksum in the same pass.");

  nb::class_<Client>(m, "Client", "One connection to the local agent (thread-safe).", nb::is_weak_referenceable())
      .def_static("connect", &Connect, nb::arg("socket_path") = "", nb::arg("client_name") = "python",
                  nb::arg("copy_threads") = 2, nb::arg("mapping_cache_bytes") = 16ull << 30,
                  nb::arg("writer_id") = "")
      .def_prop_ro("node_id", &Client::node_id)
      .def_prop_ro("socket_path", &Client::socket_path)
      .def_prop_ro("durable_base", &Client::durable_base)
      .def(
          "begin_step",
          [](Client& c, const std::string& ns, uint64_t step) {
            Check(Released([&] { return c.BeginStep(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def(
          "begin_save",
          [](Client& c, const std::string& ns, uint64_t step) {
            Check(Released([&] { return c.BeginSave(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"),
          "begin_step, after the agent aborts the steps of ns this connection created objects in "
          "(create_next_object) that are still being written (left half-written by an earlier failed save).")
      .def("create_object", &CreateObject, nb::arg("ns"), nb::arg("step"), nb::arg("name"), nb::arg("size"),
           nb::keep_alive<0, 1>())
      .def("create_next_object", &CreateNextObject, nb::arg("ns"), nb::arg("step"), nb::arg("prefix"),
           nb::arg("first"), nb::arg("suffix"), nb::arg("size"), nb::arg("begin_save") = false,
           nb::keep_alive<0, 1>(),
           "Creates the first object <prefix><n><suffix>, n = first, first + 1, ..., not sealed in the step "
           "yet; its .name and .index say which. begin_save: begin_save(ns, step) first, in the same round "
           "trip.")
      .def("seal", &Seal, nb::arg("object"), nb::arg("checksum") = "")
      .def("write_object", &WriteObject, nb::arg("ns"), nb::arg("step"), nb::arg("name"), nb::arg("data"))
      .def("write_objects", &WriteObjects, nb::arg("ns"), nb::arg("step"), nb::arg("objects"))
      .def("commit", &Commit, nb::arg("ns"), nb::arg("step"), nb::arg("world_size") = 0,
           nb::arg("persist") = false, nb::arg("expected_objects") = std::vector<std::string>(),
           nb::arg("members") = std::vector<std::string>())
      .def(
          "abort",
          [](Client& c, const std::string& ns, uint64_t step) {
            Check(Released([&] { return c.Abort(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def(
          "persist",
          [](Client& c, const std::string& ns, uint64_t step) {
            Check(Released([&] { return c.Persist(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def(
          "wait_durable",
          [](Client& c, const std::string& ns, uint64_t step, double timeout_s) {
            const std::chrono::milliseconds timeout = SecondsToMs(timeout_s);
            Check(Released([&] { return c.WaitDurable(ns, step, timeout); }));
          },
          nb::arg("ns"), nb::arg("step"), nb::arg("timeout_s") = 0.0)
      .def(
          "restore",
          [](Client& c, const std::string& ns, uint64_t step) {
            Check(Released([&] { return c.Restore(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def(
          "list",
          [](Client& c, const std::string& ns) { return Unwrap(Released([&] { return c.List(ns); })); },
          nb::arg("ns") = "")
      .def(
          "latest_step",
          [](Client& c, const std::string& ns) { return Unwrap(Released([&] { return c.LatestStep(ns); })); },
          nb::arg("ns"))
      .def(
          "show",
          [](Client& c, const std::string& ns, uint64_t step) {
            return Unwrap(Released([&] { return c.Show(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def("open", &Open, nb::arg("ns"), nb::arg("step"), nb::arg("name"), nb::keep_alive<0, 1>())
      .def("open_verified", &OpenView<&Client::OpenVerified>, nb::arg("ns"), nb::arg("step"), nb::arg("name"),
           nb::arg("verify") = "always", nb::arg("attest_max_age_s") = 900.0, nb::keep_alive<0, 1>(),
           "open + verify; on a mismatch the agent checks and repairs its copy once (docs/agent.md, "
           "\"The read path\") and the copy it hands out instead is verified. CorruptionError when no tier "
           "holds a sound copy. verify: \"always\", \"attested\" (no hash when the agent verified the object "
           "at most attest_max_age_s ago) or \"never\" (Client::ReadVerify).")
      .def("open_to_copy", &OpenView<&Client::OpenToCopy>, nb::arg("ns"), nb::arg("step"), nb::arg("name"),
           nb::arg("verify") = "always", nb::arg("attest_max_age_s") = 900.0, nb::keep_alive<0, 1>(),
           "open_verified for a caller that copies the object out next: the hash verify asks for is done by "
           "the view's first copy_out, in its pass over the bytes (hash_due until then). A CorruptionError "
           "from that copy_out: read the object again with open_verified, which has the agent repair it "
           "(Client::OpenToCopy).")
      .def("read_objects", &ReadObjects, nb::arg("ns"), nb::arg("step"), nb::arg("objects"),
           nb::arg("verify") = "always", nb::arg("attest_max_age_s") = 900.0)
      .def_prop_ro(
          "read_counters",
          [](const Client& c) {
            const ReadCounters r = c.read_counters();
            nb::dict d;
            d["hashed"] = r.hashed;
            d["attested"] = r.attested;
            d["unverified"] = r.unverified;
            return d;
          },
          "What this connection's verified reads did: objects hashed, attested (not hashed on the "
          "agent's word) and unverified (verify=\"never\").")
      .def(
          "verify",
          [](Client& c, const std::string& ns, uint64_t step) {
            return Unwrap(Released([&] { return c.Verify(ns, step); }));
          },
          nb::arg("ns"), nb::arg("step"))
      .def("stats", [](Client& c) { return Unwrap(Released([&] { return c.Stats(); })); })
      .def(
          "delete_step",
          [](Client& c, const std::string& ns, uint64_t step, bool durable_too, bool keep_replicas) {
            Check(Released([&] { return c.DeleteStep(ns, step, durable_too, keep_replicas); }));
          },
          nb::arg("ns"), nb::arg("step"), nb::arg("durable_too") = false, nb::arg("keep_replicas") = false)
      .def(
          "prune",
          [](Client& c, const std::string& ns, uint32_t keep_memory, uint32_t keep_durable) {
            return Unwrap(Released([&] { return c.Prune(ns, keep_memory, keep_durable); }));
          },
          nb::arg("ns"), nb::arg("keep_memory"), nb::arg("keep_durable"))
      .def(
          "bind_durable",
          [](Client& c, const std::string& ns, const std::string& base) {
            return Unwrap(Released([&] { return c.BindDurable(ns, base); }));
          },
          nb::arg("ns"), nb::arg("base"))
      .def(
          "set_policy",
          [](Client& c, const std::string& ns, uint32_t keep_memory, uint32_t keep_durable, uint64_t persist_every) {
            Check(Released([&] { return c.SetPolicy(ns, keep_memory, keep_durable, persist_every); }));
          },
          nb::arg("ns"), nb::arg("keep_memory") = 0, nb::arg("keep_durable") = 0, nb::arg("persist_every") = 0)
      .def("shutdown", [](Client& c) { Check(Released([&] { return c.Shutdown(); })); });
}
