// s3_xml.cc — see s3_xml.h.
#include "s3/s3_xml.h"

#include <charconv>
#include <pugixml.hpp>
#include <sstream>

#include "common/names.h"
#include "s3/http.h"

namespace tierckpt::s3 {
namespace {

constexpr const char* kS3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/";

// Parses body; on failure the Status names the document and pugixml's reason.
Status Load(pugi::xml_document& doc, std::string_view body, std::string_view what) {
  pugi::xml_parse_result r = doc.load_buffer(body.data(), body.size());
  if (!r) {
    return ProtocolError("S3 sent a " + std::string(what) + " response that is not XML (" +
                         r.description() + " at byte " + std::to_string(r.offset) +
                         "): " + QuoteForMessage(body));
  }
  return Status::Ok();
}

Status Missing(std::string_view what, std::string_view element, std::string_view body) {
  return ProtocolError("S3 sent a " + std::string(what) + " response without <" +
                       std::string(element) + ">: " + QuoteForMessage(body));
}

std::string Text(const pugi::xml_node& node, const char* child) {
  return node.child(child).text().as_string();
}

bool ParseU64(std::string_view s, uint64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// Decodes `s` when `encoded`, else returns it.
Result<std::string> MaybeDecode(const char* s, bool encoded) {
  if (!encoded) return std::string(s);
  return UrlDecode(s);
}

std::string Print(const pugi::xml_document& doc) {
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>" + out.str();
}

}  // namespace

Result<std::string> UrlDecode(std::string_view s) {
  std::optional<std::string> out = PercentDecode(s, /*plus_is_space=*/true);
  if (!out) return ProtocolError("S3 sent a URL-encoded name with a bad %-escape: " + QuoteForMessage(s));
  return std::move(*out);
}

std::optional<S3ErrorBody> ParseErrorBody(std::string_view body) {
  if (body.empty()) return std::nullopt;
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return std::nullopt;
  pugi::xml_node e = doc.child("Error");
  if (!e) return std::nullopt;
  return S3ErrorBody{Text(e, "Code"), Text(e, "Message"), Text(e, "RequestId")};
}

Result<std::string> ParseInitiateMultipartUpload(std::string_view body) {
  constexpr std::string_view kWhat = "CreateMultipartUpload";
  pugi::xml_document doc;
  TC_RETURN_IF_ERROR(Load(doc, body, kWhat));
  pugi::xml_node id = doc.child("InitiateMultipartUploadResult").child("UploadId");
  if (!id || std::string_view(id.text().as_string()).empty()) {
    return Missing(kWhat, "UploadId", body);
  }
  return std::string(id.text().as_string());
}

std::string BuildCompleteMultipartUpload(const std::vector<CompletedPart>& parts) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = kS3Namespace;
  for (const CompletedPart& p : parts) {
    pugi::xml_node part = root.append_child("Part");
    part.append_child("PartNumber").text() = p.part_number;
    part.append_child("ETag").text() = p.etag.c_str();
    if (!p.crc32c.empty()) part.append_child("ChecksumCRC32C").text() = p.crc32c.c_str();
  }
  return Print(doc);
}

Result<ListPage> ParseListObjectsV2(std::string_view body) {
  constexpr std::string_view kWhat = "ListObjectsV2";
  pugi::xml_document doc;
  TC_RETURN_IF_ERROR(Load(doc, body, kWhat));
  pugi::xml_node root = doc.child("ListBucketResult");
  if (!root) return Missing(kWhat, "ListBucketResult", body);
  const bool encoded = std::string_view(root.child("EncodingType").text().as_string()) == "url";
  ListPage page;
  page.truncated = std::string_view(root.child("IsTruncated").text().as_string()) == "true";
  page.next_continuation_token = Text(root, "NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Missing(kWhat, "NextContinuationToken (the page is truncated)", body);
  }
  for (pugi::xml_node c : root.children("Contents")) {
    ListedObject o;
    TC_ASSIGN_OR_RETURN(o.key, MaybeDecode(c.child("Key").text().as_string(), encoded));
    if (o.key.empty()) return Missing(kWhat, "Contents/Key", body);
    if (!ParseU64(c.child("Size").text().as_string(), &o.size)) {
      return Missing(kWhat, "Contents/Size (a number)", body);
    }
    o.etag = Text(c, "ETag");
    page.objects.push_back(std::move(o));
  }
  for (pugi::xml_node p : root.children("CommonPrefixes")) {
    TC_ASSIGN_OR_RETURN(std::string prefix, MaybeDecode(p.child("Prefix").text().as_string(), encoded));
    page.common_prefixes.push_back(std::move(prefix));
  }
  return page;
}

std::string BuildDeleteObjects(const std::vector<std::string>& keys) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("Delete");
  root.append_attribute("xmlns") = kS3Namespace;
  root.append_child("Quiet").text() = "true";
  for (const std::string& k : keys) {
    root.append_child("Object").append_child("Key").text() = k.c_str();
  }
  return Print(doc);
}

Result<std::vector<DeleteError>> ParseDeleteResult(std::string_view body) {
  constexpr std::string_view kWhat = "DeleteObjects";
  pugi::xml_document doc;
  TC_RETURN_IF_ERROR(Load(doc, body, kWhat));
  pugi::xml_node root = doc.child("DeleteResult");
  if (!root) return Missing(kWhat, "DeleteResult", body);
  std::vector<DeleteError> errors;
  for (pugi::xml_node e : root.children("Error")) {
    errors.push_back({Text(e, "Key"), Text(e, "Code"), Text(e, "Message")});
  }
  return errors;
}

Result<UploadsPage> ParseListMultipartUploads(std::string_view body) {
  constexpr std::string_view kWhat = "ListMultipartUploads";
  pugi::xml_document doc;
  TC_RETURN_IF_ERROR(Load(doc, body, kWhat));
  pugi::xml_node root = doc.child("ListMultipartUploadsResult");
  if (!root) return Missing(kWhat, "ListMultipartUploadsResult", body);
  const bool encoded = std::string_view(root.child("EncodingType").text().as_string()) == "url";
  UploadsPage page;
  page.truncated = std::string_view(root.child("IsTruncated").text().as_string()) == "true";
  TC_ASSIGN_OR_RETURN(page.next_key_marker,
                      MaybeDecode(root.child("NextKeyMarker").text().as_string(), encoded));
  page.next_upload_id_marker = Text(root, "NextUploadIdMarker");
  for (pugi::xml_node u : root.children("Upload")) {
    MultipartUpload upload;
    TC_ASSIGN_OR_RETURN(upload.key, MaybeDecode(u.child("Key").text().as_string(), encoded));
    upload.upload_id = Text(u, "UploadId");
    if (upload.key.empty() || upload.upload_id.empty()) {
      return Missing(kWhat, "Upload/Key and Upload/UploadId", body);
    }
    page.uploads.push_back(std::move(upload));
  }
  if (page.truncated && page.next_key_marker.empty() && page.next_upload_id_marker.empty()) {
    return Missing(kWhat, "NextKeyMarker (the page is truncated)", body);
  }
  return page;
}

}  // namespace tierckpt::s3
