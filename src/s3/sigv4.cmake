# sigv4.cmake — included by src/s3/CMakeLists.txt: the SigV4 signer, CRC32C
# and S3 Express One Zone sessions (docs/s3.md).
target_sources(tc_s3 PRIVATE
  crc32c.cc
  s3_express.cc
  signer.cc
  sigv4.cc
)

tierckpt_add_test(tc_s3_sigv4_test
  SOURCES crc32c_test.cc s3_express_test.cc sigv4_test.cc
  LIBS tc_s3 tc_testing_s3)
if(TARGET tc_s3_sigv4_test)
  # The AWS SigV4 test suite and its provenance: tests/data/sigv4/README.md.
  target_compile_definitions(tc_s3_sigv4_test PRIVATE
    TC_SIGV4_TESTDATA="${PROJECT_SOURCE_DIR}/tests/data/sigv4")
endif()
