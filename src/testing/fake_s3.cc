// fake_s3.cc — see fake_s3.h.
#include "testing/fake_s3.h"

#include <algorithm>
#include <cstring>
#include <pugixml.hpp>

#include "s3/crc32c.h"

namespace tierckpt::s3 {
namespace {

HttpResponse Error(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>" +
           message + "</Message><RequestId>fake-request</RequestId></Error>";
  r.headers.emplace_back("x-amz-request-id", "fake-request");
  return r;
}

HttpResponse Ok(int status = 200, std::string body = "") {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string Header(const HttpRequest& request, std::string_view name) {
  auto v = FindHeader(request.headers, name);
  return v ? std::string(*v) : std::string();
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string ETagOf(std::string_view data) {
  return "\"" + std::to_string(Crc32c(data.data(), data.size())) + "-" +
         std::to_string(data.size()) + "\"";
}

}  // namespace

void FakeS3::ResetConnections() {
  MutexLock lock(&mu_);
  ++resets_;
}
void FakeS3::SetInterceptor(Interceptor interceptor) {
  MutexLock lock(&mu_);
  interceptor_ = std::move(interceptor);
}
void FakeS3::SetConditionalMode(ConditionalMode mode) {
  MutexLock lock(&mu_);
  conditional_ = mode;
}
void FakeS3::FailDeleteOnce(const std::string& key, const std::string& code) {
  MutexLock lock(&mu_);
  delete_failures_[key] = code;
}
void FakeS3::SetMaxKeys(int max_keys) {
  MutexLock lock(&mu_);
  max_keys_ = max_keys;
}
std::optional<std::string> FakeS3::Object(const std::string& key) const {
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}
void FakeS3::PutRaw(const std::string& key, std::string data) {
  MutexLock lock(&mu_);
  objects_[key] = std::move(data);
}
std::vector<std::string> FakeS3::Keys() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : objects_) out.push_back(k);
  return out;
}
size_t FakeS3::UploadsInProgress() const {
  MutexLock lock(&mu_);
  return uploads_.size();
}
int FakeS3::resets() const {
  MutexLock lock(&mu_);
  return resets_;
}
std::vector<std::string> FakeS3::Log() const {
  MutexLock lock(&mu_);
  return log_;
}

Result<FakeS3::Parsed> FakeS3::Parse(const HttpRequest& request) const {
  Parsed p;
  for (const auto& [name, value] : request.query) p.query[name] = value;
  std::string_view path = request.path;
  const bool virtual_host = request.endpoint.find("://" + bucket_ + ".") != std::string::npos;
  if (!virtual_host) {
    const std::string bucket_path = "/" + bucket_;
    if (path.substr(0, bucket_path.size()) != bucket_path) {
      return NotFound("FakeS3: path " + request.path + " is not in bucket " + bucket_);
    }
    path.remove_prefix(bucket_path.size());
  }
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  p.key = PercentDecode(path).value_or(std::string(path));
  return p;
}

Result<HttpResponse> FakeS3::Send(const HttpRequest& request, const SendOptions& options) {
  const std::string_view body(static_cast<const char*>(request.body),
                              request.body != nullptr ? request.body_size : 0);
  Interceptor interceptor;
  {
    MutexLock lock(&mu_);
    interceptor = interceptor_;
  }
  std::optional<Result<HttpResponse>> intercepted;
  if (interceptor) intercepted = interceptor(request, body);
  Result<HttpResponse> response = Internal("unset");
  if (intercepted) {
    response = std::move(*intercepted);
  } else {
    Result<Parsed> parsed = Parse(request);
    if (!parsed.ok()) {
      response = Error(404, "NoSuchBucket", parsed.status().message());
    } else {
      MutexLock lock(&mu_);
      response = Handle(request, *parsed, body);
    }
  }
  if (!response.ok()) return response;
  if (request.method == "HEAD") response->body.clear();
  TC_RETURN_IF_ERROR(DeliverToSink(options, &*response, "FakeS3"));
  return response;
}

HttpResponse FakeS3::Handle(const HttpRequest& request, const Parsed& p, std::string_view body) {
  const std::string op = request.query.empty() ? (p.key.empty() ? "bucket" : "object")
                                               : request.query.front().first;
  log_.push_back(request.method + " " + op);
  if (request.method == "PUT") return Put(request, p, body);
  if (request.method == "GET" || request.method == "HEAD") {
    if (p.key.empty() && p.query.count("uploads")) return ListUploads(p);
    if (p.key.empty()) return List(p);
    return Get(request, p);
  }
  if (request.method == "POST") {
    if (p.key.empty() && p.query.count("delete")) return DeleteMany(request, body);
    if (p.query.count("uploads")) {
      if (Header(request, "x-amz-checksum-algorithm") != "CRC32C") {
        return Error(400, "InvalidRequest", "tierckpt always asks for CRC32C");
      }
      const std::string id = "upload-" + std::to_string(next_upload_++);
      uploads_[id].key = p.key;
      return Ok(200, "<InitiateMultipartUploadResult><Bucket>" + bucket_ + "</Bucket><Key>" +
                         XmlEscape(p.key) + "</Key><UploadId>" + id +
                         "</UploadId></InitiateMultipartUploadResult>");
    }
    if (p.query.count("uploadId")) return Complete(request, p, body);
  }
  if (request.method == "DELETE") {
    if (auto id = p.query.find("uploadId"); id != p.query.end()) {
      if (uploads_.erase(id->second) == 0) return Error(404, "NoSuchUpload", "no such upload");
      return Ok(204);
    }
    objects_.erase(p.key);
    return Ok(204);
  }
  return Error(400, "NotImplemented", "FakeS3 does not implement " + request.method + " " + op);
}

HttpResponse FakeS3::Put(const HttpRequest& request, const Parsed& p, std::string_view body) {
  const std::string crc = Header(request, "x-amz-checksum-crc32c");
  if (!crc.empty() && crc != Crc32cBase64(Crc32c(body.data(), body.size()))) {
    return Error(400, "BadDigest", "The CRC32C you specified did not match the calculated checksum.");
  }
  if (auto id = p.query.find("uploadId"); id != p.query.end()) {
    auto upload = uploads_.find(id->second);
    if (upload == uploads_.end()) return Error(404, "NoSuchUpload", "no such upload");
    const int number = std::stoi(p.query.at("partNumber"));
    std::string etag = ETagOf(body);
    upload->second.parts[number] = {etag, std::string(body)};
    HttpResponse r = Ok();
    r.headers.emplace_back("etag", etag);
    return r;
  }
  if (Header(request, "if-none-match") == "*") {
    if (conditional_ == ConditionalMode::kNotImplemented) {
      return Error(501, "NotImplemented", "A header you provided implies functionality that is not implemented");
    }
    if (conditional_ == ConditionalMode::kEnforce && objects_.count(p.key)) {
      return Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
    }
  }
  objects_[p.key] = std::string(body);
  HttpResponse r = Ok();
  r.headers.emplace_back("etag", ETagOf(body));
  return r;
}

HttpResponse FakeS3::Get(const HttpRequest& request, const Parsed& p) {
  auto it = objects_.find(p.key);
  if (it == objects_.end()) {
    if (request.method == "HEAD") return Ok(404);
    return Error(404, "NoSuchKey", "The specified key does not exist.");
  }
  const std::string& data = it->second;
  HttpResponse r = Ok();
  r.headers.emplace_back("etag", ETagOf(data));
  const std::string range = Header(request, "range");
  if (request.method == "HEAD" || range.empty()) {
    r.headers.emplace_back("content-length", std::to_string(data.size()));
    if (request.method == "GET") r.body = data;
    return r;
  }
  const size_t dash = range.find('-');
  const uint64_t first = std::stoull(range.substr(6, dash - 6));
  const uint64_t last = std::stoull(range.substr(dash + 1));
  if (first >= data.size()) return Error(416, "InvalidRange", "The requested range is not satisfiable");
  const uint64_t end = std::min<uint64_t>(last + 1, data.size());
  r.status = 206;
  r.body = data.substr(first, end - first);
  r.headers.emplace_back("content-range", "bytes " + std::to_string(first) + "-" +
                                              std::to_string(end - 1) + "/" +
                                              std::to_string(data.size()));
  return r;
}

HttpResponse FakeS3::List(const Parsed& p) {
  if (!p.query.count("list-type") || p.query.at("list-type") != "2") {
    return Error(400, "InvalidArgument", "FakeS3 lists only with list-type=2");
  }
  auto get = [&](const char* name) {
    auto it = p.query.find(name);
    return it == p.query.end() ? std::string() : it->second;
  };
  const std::string prefix = get("prefix");
  const std::string delimiter = get("delimiter");
  const bool encode = get("encoding-type") == "url";
  int max_keys = max_keys_;
  if (!get("max-keys").empty()) max_keys = std::min(max_keys, std::stoi(get("max-keys")));
  std::string after = get("continuation-token");  // our tokens are the last name returned
  auto enc = [&](const std::string& s) { return encode ? UriEncode(s, false) : XmlEscape(s); };
  std::string contents;
  std::string prefixes;
  std::set<std::string> seen_prefixes;
  int count = 0;
  std::string last;
  bool truncated = false;
  for (auto it = objects_.lower_bound(prefix); it != objects_.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    std::string name = key;
    bool is_prefix = false;
    if (!delimiter.empty()) {
      size_t d = key.find(delimiter, prefix.size());
      if (d != std::string::npos) {
        name = key.substr(0, d + delimiter.size());
        is_prefix = true;
      }
    }
    if (!after.empty() && name <= after) continue;
    if (is_prefix && seen_prefixes.count(name)) continue;
    if (count == max_keys) {
      truncated = true;
      break;
    }
    ++count;
    last = name;
    if (is_prefix) {
      seen_prefixes.insert(name);
      prefixes += "<CommonPrefixes><Prefix>" + enc(name) + "</Prefix></CommonPrefixes>";
    } else {
      contents += "<Contents><Key>" + enc(key) + "</Key><Size>" + std::to_string(it->second.size()) +
                  "</Size><ETag>" + ETagOf(it->second) + "</ETag></Contents>";
    }
  }
  std::string body = "<ListBucketResult><Name>" + bucket_ + "</Name><Prefix>" + enc(prefix) +
                     "</Prefix><KeyCount>" + std::to_string(count) + "</KeyCount><IsTruncated>" +
                     (truncated ? "true" : "false") + "</IsTruncated>";
  if (encode) body += "<EncodingType>url</EncodingType>";
  if (truncated) body += "<NextContinuationToken>" + XmlEscape(last) + "</NextContinuationToken>";
  return Ok(200, body + contents + prefixes + "</ListBucketResult>");
}

HttpResponse FakeS3::DeleteMany(const HttpRequest& request, std::string_view body) {
  if (Header(request, "content-md5").empty() && Header(request, "x-amz-checksum-crc32c").empty()) {
    return Error(400, "InvalidRequest", "Missing required header for this request: Content-MD5");
  }
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return Error(400, "MalformedXML", "bad XML");
  std::string result = "<DeleteResult>";
  int n = 0;
  for (pugi::xml_node o : doc.child("Delete").children("Object")) {
    const std::string key = o.child("Key").text().as_string();
    ++n;
    if (auto f = delete_failures_.find(key); f != delete_failures_.end()) {
      result += "<Error><Key>" + XmlEscape(key) + "</Key><Code>" + f->second +
                "</Code><Message>injected</Message></Error>";
      delete_failures_.erase(f);
      continue;
    }
    objects_.erase(key);
  }
  if (n > 1000) return Error(400, "MalformedXML", "more than 1000 keys");
  return Ok(200, result + "</DeleteResult>");
}

HttpResponse FakeS3::Complete(const HttpRequest& request, const Parsed& p, std::string_view body) {
  auto upload = uploads_.find(p.query.at("uploadId"));
  if (upload == uploads_.end()) return Error(404, "NoSuchUpload", "no such upload");
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return Error(400, "MalformedXML", "bad XML");
  std::string data;
  int expected = 1;
  for (pugi::xml_node part : doc.child("CompleteMultipartUpload").children("Part")) {
    const int number = part.child("PartNumber").text().as_int();
    auto it = upload->second.parts.find(number);
    if (number != expected++ || it == upload->second.parts.end() ||
        it->second.first != part.child("ETag").text().as_string()) {
      return Error(400, "InvalidPart", "part " + std::to_string(number) + " is not as uploaded");
    }
    const std::string& part_data = it->second.second;
    if (std::string(part.child("ChecksumCRC32C").text().as_string()) !=
        Crc32cBase64(Crc32c(part_data.data(), part_data.size()))) {
      return Error(400, "InvalidPart", "part " + std::to_string(number) + " checksum mismatch");
    }
    data += part_data;
  }
  const std::string whole = Header(request, "x-amz-checksum-crc32c");
  if (!whole.empty() && whole != Crc32cBase64(Crc32c(data.data(), data.size()))) {
    return Error(400, "BadDigest", "the full-object CRC32C does not match");
  }
  if (Header(request, "if-none-match") == "*" && conditional_ == ConditionalMode::kEnforce &&
      objects_.count(p.key)) {
    return Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
  }
  objects_[p.key] = std::move(data);
  uploads_.erase(upload);
  return Ok(200, "<CompleteMultipartUploadResult><Key>" + XmlEscape(p.key) +
                     "</Key></CompleteMultipartUploadResult>");
}

HttpResponse FakeS3::ListUploads(const Parsed& p) {
  const std::string prefix = p.query.count("prefix") ? p.query.at("prefix") : "";
  std::string body = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>";
  for (const auto& [id, upload] : uploads_) {
    if (upload.key.compare(0, prefix.size(), prefix) != 0) continue;
    body += "<Upload><Key>" + XmlEscape(upload.key) + "</Key><UploadId>" + id + "</UploadId></Upload>";
  }
  return Ok(200, body + "</ListMultipartUploadsResult>");
}

}  // namespace tierckpt::s3
