// curl_transport.cc — see curl_transport.h.
#include "s3/curl_transport.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <utility>

#include "os/files.h"

namespace tierckpt::s3 {
namespace {

Status GlobalInit() {
  static const CURLcode result = curl_global_init(CURL_GLOBAL_ALL);
  if (result != CURLE_OK) {
    return Internal(std::string("libcurl could not be initialized (curl_global_init: ") +
                    curl_easy_strerror(result) + ")");
  }
  return Status::Ok();
}

// Owner of a header list.
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// Per-Send state the callbacks see.
struct Exchange {
  CURL* easy = nullptr;
  // Upload.
  const char* body = nullptr;
  size_t body_size = 0;
  size_t body_sent = 0;
  // Download.
  char* sink = nullptr;
  int sink_fd = -1;
  uint64_t sink_fd_offset = 0;
  size_t sink_capacity = 0;
  size_t sink_bytes = 0;
  bool sink_overflow = false;
  Status sink_error;  // a failed write to sink_fd
  std::string text_body;
  Headers headers;
};

size_t ReadBody(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* x = static_cast<Exchange*>(userdata);
  const size_t n = std::min(size * nitems, x->body_size - x->body_sent);
  if (n > 0) std::memcpy(buffer, x->body + x->body_sent, n);
  x->body_sent += n;
  return n;
}

int SeekBody(void* userdata, curl_off_t offset, int origin) {
  auto* x = static_cast<Exchange*>(userdata);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > x->body_size) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  x->body_sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t WriteBody(char* data, size_t size, size_t nmemb, void* userdata) {
  auto* x = static_cast<Exchange*>(userdata);
  const size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  if ((x->sink != nullptr || x->sink_fd >= 0) && status / 100 == 2) {
    if (n > x->sink_capacity - x->sink_bytes) {
      x->sink_overflow = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    if (x->sink != nullptr) {
      std::memcpy(x->sink + x->sink_bytes, data, n);
    } else {
      Status written = PwriteAll(x->sink_fd, data, n, x->sink_fd_offset + x->sink_bytes, "the download destination");
      if (!written.ok()) {
        x->sink_error = written.WithContext("file descriptor " + std::to_string(x->sink_fd) + " at offset " +
                                            std::to_string(x->sink_fd_offset + x->sink_bytes));
        return 0;  // aborts the transfer with CURLE_WRITE_ERROR
      }
    }
    x->sink_bytes += n;
  } else {
    x->text_body.append(data, n);
  }
  return n;
}

size_t ReadHeader(char* data, size_t size, size_t nitems, void* userdata) {
  auto* x = static_cast<Exchange*>(userdata);
  const size_t n = size * nitems;
  std::string_view line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new status line (after 100 Continue)
    x->headers.clear();
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  x->headers.emplace_back(std::move(name), std::string(value));
  return n;
}

}  // namespace

// The CURLSH handle and the locks libcurl asks for around shared data.
struct CurlTransport::Share {
  CURLSH* handle = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;

  ~Share() {
    if (handle != nullptr) curl_share_cleanup(handle);
  }
  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* userptr) {
    static_cast<Share*>(userptr)->locks[static_cast<size_t>(data)].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* userptr) {
    static_cast<Share*>(userptr)->locks[static_cast<size_t>(data)].unlock();
  }
};

CurlEasy& CurlEasy::operator=(CurlEasy&& other) noexcept {
  if (this != &other) {
    Reset();
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

void CurlEasy::Reset() {
  if (handle_ != nullptr) curl_easy_cleanup(handle_);
  handle_ = nullptr;
}

CurlOptions CurlOptions::From(const S3Config& config) {
  CurlOptions o;
  o.connect_timeout_ms = config.connect_timeout_ms;
  o.low_speed_bytes_per_s = config.low_speed_bytes_per_s;
  o.low_speed_time_s = config.low_speed_time_s;
  return o;
}

Result<std::shared_ptr<CurlTransport>> CurlTransport::Create(CurlOptions options) {
  TC_RETURN_IF_ERROR(GlobalInit());
  auto share = std::make_unique<Share>();
  share->handle = curl_share_init();
  if (share->handle == nullptr) return Internal("libcurl: curl_share_init failed (out of memory?)");
  curl_share_setopt(share->handle, CURLSHOPT_LOCKFUNC, &Share::Lock);
  curl_share_setopt(share->handle, CURLSHOPT_UNLOCKFUNC, &Share::Unlock);
  curl_share_setopt(share->handle, CURLSHOPT_USERDATA, share.get());
  curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return std::shared_ptr<CurlTransport>(new CurlTransport(options, std::move(share)));
}

CurlTransport::CurlTransport(CurlOptions options, std::unique_ptr<Share> share)
    : options_(options), share_(std::move(share)) {}

CurlTransport::~CurlTransport() {
  // Handles go before the share they use.
  MutexLock lock(&mu_);
  idle_.clear();
}

size_t CurlTransport::idle_handles() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

Result<CurlTransport::Pooled> CurlTransport::Borrow() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      Pooled p = std::move(idle_.back());
      idle_.pop_back();
      return p;
    }
  }
  Pooled p;
  p.easy = CurlEasy(curl_easy_init());
  if (!p.easy) return Internal("libcurl: curl_easy_init failed (out of memory?)");
  MutexLock lock(&mu_);
  p.generation = generation_;
  return p;
}

void CurlTransport::Return(Pooled pooled) {
  MutexLock lock(&mu_);
  if (pooled.generation != generation_ || idle_.size() >= options_.max_idle_handles) return;
  idle_.push_back(std::move(pooled));
}

void CurlTransport::ResetConnections() {
  std::vector<Pooled> dropped;
  {
    MutexLock lock(&mu_);
    ++generation_;
    dropped.swap(idle_);
  }
  // `dropped` closes its connections here, outside the lock.
}

Result<HttpResponse> CurlTransport::Send(const HttpRequest& request, const SendOptions& options) {
  TC_ASSIGN_OR_RETURN(Pooled pooled, Borrow());
  CURL* easy = pooled.easy.get();
  curl_easy_reset(easy);  // options only; the connection and caches stay

  const std::string url = RequestUrl(request);
  Exchange x;
  x.easy = easy;
  x.body = static_cast<const char*>(request.body);
  x.body_size = request.body != nullptr ? request.body_size : 0;
  x.sink = static_cast<char*>(options.sink);
  x.sink_fd = options.sink == nullptr ? options.sink_fd : -1;
  x.sink_fd_offset = options.sink_fd_offset;
  x.sink_capacity = options.sink != nullptr || x.sink_fd >= 0 ? options.sink_capacity : 0;

  Slist headers;
  bool has_content_type = false;
  auto add_header = [&](const std::string& line) {
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (next != nullptr) {
      (void)headers.release();
      headers.reset(next);
    }
  };
  for (const auto& [name, value] : request.headers) {
    has_content_type = has_content_type || name == "content-type";
    // "name;" is curl's spelling of a header with an empty value.
    add_header(value.empty() ? name + ";" : name + ": " + value);
  }
  add_header("Expect:");  // no 100-continue round trip
  if (!has_content_type) add_header("Content-Type:");  // curl's POST default is not wanted

  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_SHARE, share_->handle);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "tierckpt");
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
  if (options_.low_speed_time_s > 0) {
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, options_.low_speed_bytes_per_s);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, options_.low_speed_time_s);
  }
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &ReadHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(easy, CURLOPT_READFUNCTION, &ReadBody);
  curl_easy_setopt(easy, CURLOPT_READDATA, &x);
  curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, &SeekBody);
  curl_easy_setopt(easy, CURLOPT_SEEKDATA, &x);
  const curl_off_t body_size = static_cast<curl_off_t>(x.body_size);
  if (request.method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, body_size);
  } else if (request.method == "POST") {
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, body_size);
  } else {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (x.body_size > 0) {
      curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, body_size);
    }
  }

  const CURLcode rc = curl_easy_perform(easy);
  if (rc != CURLE_OK) {
    // The connection may be half-used: do not pool the handle.
    std::string what = request.method + " " + url + ": " +
                       (error[0] != '\0' ? std::string(error) : curl_easy_strerror(rc));
    if (!x.sink_error.ok()) {
      return Status(x.sink_error.code(), request.method + " " + url + ": writing the body: " +
                                             x.sink_error.message() + " (is the destination full?)");
    }
    if (x.sink_overflow) {
      return Corruption(request.method + " " + url + ": the server sent more than the " +
                        std::to_string(x.sink_capacity) + " bytes asked for");
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return Timeout(what + " (connect timeout " + std::to_string(options_.connect_timeout_ms) +
                     " ms, low-speed abort below " + std::to_string(options_.low_speed_bytes_per_s) +
                     " B/s for " + std::to_string(options_.low_speed_time_s) + " s)");
    }
    return Unavailable(what);
  }
  HttpResponse response;
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  response.headers = std::move(x.headers);
  response.body = std::move(x.text_body);
  response.sink_bytes = x.sink_bytes;
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, nullptr);  // `error` goes out of scope
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, nullptr);
  Return(std::move(pooled));
  return response;
}

}  // namespace tierckpt::s3
