# The libcurl transport, the S3 URL/config parser and the S3 client (REST
# operations, retries, multipart, listing, deletion). The tests run against
# FakeS3 and FakeTransport (src/testing/, tc_testing_s3).
target_sources(tc_s3 PRIVATE
  curl_transport.cc
  s3_client.cc
  s3_config.cc
  s3_errors.cc
  s3_listing.cc
  s3_multipart.cc
  s3_open.cc
  s3_retry.cc
  s3_upload_many.cc
  s3_xml.cc
  upload_plan.cc
)

tierckpt_add_test(tc_s3_client_test
  SOURCES
    curl_transport_test.cc
    s3_client_test.cc
    s3_config_test.cc
    s3_multipart_test.cc
    s3_xml_test.cc
    upload_plan_test.cc
  LIBS tc_s3 tc_testing_s3)
