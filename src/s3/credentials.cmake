# The AWS credentials chain (credentials_chain.h): environment, web identity,
# shared files, container, IMDSv2, and the caching provider in front of them.
target_sources(tc_s3 PRIVATE
  credentials.cc
  credentials_caching.cc
  credentials_chain.cc
  credentials_container.cc
  credentials_env.cc
  credentials_imds.cc
  credentials_profile.cc
  credentials_web_identity.cc
  ini.cc
)
tierckpt_add_test(tc_s3_credentials_test
  SOURCES
    credentials_caching_test.cc
    credentials_chain_test.cc
    credentials_container_test.cc
    credentials_env_test.cc
    credentials_imds_test.cc
    credentials_parse_test.cc
    credentials_profile_test.cc
    credentials_web_identity_test.cc
  LIBS tc_s3 tc_os tc_testing_s3)
