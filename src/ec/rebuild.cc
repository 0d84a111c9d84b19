// rebuild.cc — see rebuild.h.
#include "ec/rebuild.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "common/checksum.h"
#include "ec/reed_solomon.h"

namespace tierckpt::ec {
namespace {

// Reads [offset, offset + len) of a data piece from its part's objects,
// zeros past the piece's end (the padding to the group's length).
Status ReadDataPiece(const DataPiece& piece, ObjectSource& part, uint64_t offset, uint8_t* buf, size_t len) {
  uint64_t start = 0;
  const uint64_t end = offset + len;
  for (const PieceObject& o : piece.objects) {
    const uint64_t s = std::max(start, offset), e = std::min(start + o.size, end);
    if (s < e)
      TC_RETURN_IF_ERROR(part.Read(o.name, s - start, buf + (s - offset), static_cast<size_t>(e - s)));
    start += o.size;
    if (start >= end) break;
  }
  if (piece.length < end) {
    const uint64_t from = std::max(piece.length, offset);
    std::memset(buf + (from - offset), 0, static_cast<size_t>(end - from));
  }
  return Status::Ok();
}

class Rebuild {
 public:
  Rebuild(const ParityRecord& r, uint32_t lost, ObjectSink& sink, size_t chunk)
      : r_(r),
        lost_(lost),
        sink_(sink),
        chunk_(chunk),
        where_("rebuilding data piece " + std::to_string(lost) + " (node " + r.data[lost].member + ") of " +
               r.ns + " step " + std::to_string(r.step) + " group " + std::to_string(r.group)) {}

  const std::string& where() const { return where_; }
  std::string PieceName(uint32_t piece) const {
    if (piece < r_.data.size())
      return "data piece " + std::to_string(piece) + " (node " + r_.data[piece].member + ")";
    if (piece < r_.k) return "zero piece " + std::to_string(piece);
    return "parity piece " + std::to_string(piece - r_.k);
  }

  // One pass over the lost piece with these k survivors. Ok when every
  // rebuilt object matched; else *bad_read is the survivor whose read
  // failed, if one did, and *mismatch says a rebuilt object did not match.
  Status Pass(const ReedSolomon& rs, const std::vector<const Survivor*>& use, const Survivor** bad_read,
              bool* mismatch) {
    const uint32_t n = r_.k + r_.m;
    const DataPiece& lost = r_.data[lost_];
    std::vector<std::vector<uint8_t>> bufs(use.size(), std::vector<uint8_t>(chunk_));
    std::vector<uint8_t> out(chunk_);
    std::vector<const uint8_t*> pieces(n, nullptr);
    std::vector<uint8_t*> outs(n, nullptr);
    outs[lost_] = out.data();
    std::vector<Hasher> hashers(lost.objects.size());
    for (const PieceObject& o : lost.objects) {  // the empty ones get their one write here
      if (o.size == 0)
        TC_RETURN_IF_ERROR(sink_.Write(o.name, 0, {}).WithContext(where_ + ": writing object " + o.name));
    }
    for (uint64_t off = 0; off < lost.length; off += chunk_) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk_, lost.length - off));
      for (size_t u = 0; u < use.size(); ++u) {
        const Survivor& s = *use[u];
        Status st;
        if (s.piece < r_.data.size()) {
          st = ReadDataPiece(r_.data[s.piece], *s.part, off, bufs[u].data(), len);
        } else if (s.piece < r_.k) {
          std::memset(bufs[u].data(), 0, len);
        } else {
          st = s.parity->Read(off, bufs[u].data(), len);
        }
        if (!st.ok()) {
          *bad_read = &s;
          return st.WithContext(where_ + ": reading " + PieceName(s.piece));
        }
        pieces[s.piece] = bufs[u].data();
      }
      TC_RETURN_IF_ERROR(rs.Reconstruct(pieces, outs, len).WithContext(where_));
      // The chunk [off, off + len) of the lost piece, onto its objects.
      uint64_t start = 0;
      for (size_t o = 0; o < lost.objects.size(); ++o) {
        const PieceObject& po = lost.objects[o];
        const uint64_t s = std::max(start, off), e = std::min(start + po.size, off + len);
        if (s < e) {
          std::span<const uint8_t> bytes(out.data() + (s - off), static_cast<size_t>(e - s));
          hashers[o].Update(bytes.data(), bytes.size());
          TC_RETURN_IF_ERROR(
              sink_.Write(po.name, s - start, bytes).WithContext(where_ + ": writing object " + po.name));
        }
        start += po.size;
      }
    }
    for (size_t o = 0; o < lost.objects.size(); ++o) {
      const std::string got = hashers[o].Finish().ToString();
      if (got != lost.objects[o].checksum) {
        *mismatch = true;
        return Corruption(where_ + ": rebuilt object " + lost.objects[o].name + " hashes to " + got +
                          " but the record says " + lost.objects[o].checksum);
      }
    }
    return Status::Ok();
  }

  // Checks a survivor's whole piece against the record.
  Status Verify(const Survivor& s) {
    std::vector<uint8_t> buf(chunk_);
    if (s.piece < r_.data.size()) {
      for (const PieceObject& o : r_.data[s.piece].objects) {
        Hasher h;
        for (uint64_t at = 0; at < o.size; at += chunk_) {
          const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk_, o.size - at));
          TC_RETURN_IF_ERROR(
              s.part->Read(o.name, at, buf.data(), len).WithContext("reading " + PieceName(s.piece)));
          h.Update(buf.data(), len);
        }
        if (h.Finish().ToString() != o.checksum) {
          return Corruption(PieceName(s.piece) + ": object " + o.name + " hashes to " +
                            h.Finish().ToString() + " but the record says " + o.checksum);
        }
      }
      return Status::Ok();
    }
    if (s.piece < r_.k) return Status::Ok();
    const ParityPiece* p = r_.FindParity(s.piece - r_.k);
    Hasher h;
    for (uint64_t at = 0; at < p->length; at += chunk_) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk_, p->length - at));
      TC_RETURN_IF_ERROR(s.parity->Read(at, buf.data(), len).WithContext("reading " + PieceName(s.piece)));
      h.Update(buf.data(), len);
    }
    if (h.Finish().ToString() != p->checksum) {
      return Corruption(PieceName(s.piece) + " hashes to " + h.Finish().ToString() + " but the record says " +
                        p->checksum + "; do not use it, compute it again from the group's parts");
    }
    return Status::Ok();
  }

 private:
  const ParityRecord& r_;
  const uint32_t lost_;
  ObjectSink& sink_;
  const size_t chunk_;
  const std::string where_;
};

}  // namespace

Result<RebuildReport> RebuildPiece(const ParityRecord& record, uint32_t lost,
                                   std::span<const Survivor> survivors, ObjectSink& sink,
                                   const RebuildOptions& options) {
  TC_RETURN_IF_ERROR(record.Validate().WithContext("rebuilding from the parity record of " + record.ns +
                                                   " step " + std::to_string(record.step) + " group " +
                                                   std::to_string(record.group)));
  if (lost >= record.data.size()) {
    return InvalidArgument("rebuilding data piece " + std::to_string(lost) + " of " + record.ns + " step " +
                           std::to_string(record.step) + " group " + std::to_string(record.group) +
                           ": the group has " + std::to_string(record.data.size()) + " data pieces");
  }
  if (options.chunk_bytes == 0) return InvalidArgument("rebuilding: chunk_bytes must be above 0");
  TC_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(record.k, record.m));
  Rebuild rebuild(record, lost, sink, options.chunk_bytes);
  const uint32_t n = record.k + record.m;

  // The candidates: a short group's zero pieces (they survive for free) and the survivors
  // given, less parity pieces the record does not describe.
  std::vector<Survivor> zeros;
  for (uint32_t i = static_cast<uint32_t>(record.data.size()); i < record.k; ++i)
    zeros.push_back(Survivor{i});
  std::vector<const Survivor*> candidates;
  for (const Survivor& z : zeros) candidates.push_back(&z);
  RebuildReport report;
  std::set<uint32_t> seen;
  for (const Survivor& s : survivors) {
    const std::string name = "survivor " + std::to_string(s.piece);
    if (s.piece >= n || s.piece == lost || !seen.insert(s.piece).second ||
        (s.piece >= record.data.size() && s.piece < record.k)) {
      return InvalidArgument(
          rebuild.where() + ": " + name +
          " is not a piece to rebuild from (outside the code, the lost piece, given twice, or a "
          "zero piece of a short group)");
    }
    if ((s.piece < record.k && s.part == nullptr) || (s.piece >= record.k && s.parity == nullptr)) {
      return InvalidArgument(rebuild.where() + ": " + rebuild.PieceName(s.piece) +
                             " has no source to read it from");
    }
  }
  for (const Survivor& s : survivors) {
    if (s.piece >= record.k && record.FindParity(s.piece - record.k) == nullptr) {
      report.rejected.emplace_back(
          s.piece,
          InvalidArgument(rebuild.PieceName(s.piece) + " is not described by the record; merge its holder's "
                                                       "record first"));
      continue;
    }
    candidates.push_back(&s);
  }
  // By piece: the data pieces and zero pieces before the parity pieces.
  std::sort(candidates.begin(), candidates.end(),
            [](const Survivor* a, const Survivor* b) { return a->piece < b->piece; });

  auto rejected_text = [&] {
    std::string out;
    for (const auto& [piece, st] : report.rejected)
      out += "; " + rebuild.PieceName(piece) + ": " + st.message();
    return out;
  };
  while (true) {
    if (candidates.size() < record.k) {
      return FailedPrecondition(rebuild.where() + ": " + std::to_string(candidates.size()) +
                                " usable pieces of the " + std::to_string(record.k) + " needed (" +
                                std::to_string(survivors.size()) + " survivors given, " +
                                std::to_string(report.rejected.size()) + " set aside" + rejected_text() +
                                "); rebuild from the durable tier instead");
    }
    std::vector<const Survivor*> use(candidates.begin(), candidates.begin() + record.k);
    const Survivor* bad_read = nullptr;
    bool mismatch = false;
    Status st = rebuild.Pass(rs, use, &bad_read, &mismatch);
    if (st.ok()) {
      for (const Survivor* s : use) report.used.push_back(s->piece);
      return report;
    }
    if (!mismatch && bad_read == nullptr) return st;  // the sink's or a bug's
    std::set<const Survivor*> bad;
    if (bad_read != nullptr) {
      bad.insert(bad_read);
      report.rejected.emplace_back(bad_read->piece, st);
    } else {
      for (const Survivor* s : use) {
        Status v = rebuild.Verify(*s);
        if (!v.ok()) {
          bad.insert(s);
          report.rejected.emplace_back(s->piece, v);
        }
      }
      if (bad.empty()) {
        return Corruption(st.message() +
                          ", yet every piece it was rebuilt from matches the record: the record does "
                          "not describe these pieces; rebuild from the durable tier");
      }
    }
    std::erase_if(candidates, [&](const Survivor* s) { return bad.count(s) != 0; });
  }
}

}  // namespace tierckpt::ec
