// ini.h — the INI dialect of the AWS shared config files (~/.aws/credentials,
// ~/.aws/config), as botocore reads them.
//
//   [section name]        inner whitespace runs collapse to one space
//   key = value           key lower-cased, both sides trimmed
//   # comment / ; comment full-line comments only (values may hold '#')
//   s3 =                  a key with an empty value followed by indented
//     addressing_style = path   lines gives sub-keys "s3.addressing_style"
//   indented line         after a non-empty value: continues it ("\n" joined)
//
// Repeated sections merge; a repeated key keeps its last value. Errors
// (kInvalidArgument) name the file and line, never the line's text (it may
// hold a secret). Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

using IniSection = std::map<std::string, std::string, std::less<>>;

struct IniFile {
  std::map<std::string, IniSection, std::less<>> sections;

  // The section, or null when absent.
  const IniSection* Find(std::string_view name) const;
};

// Parses `text`; `path` only names the file in errors.
Result<IniFile> ParseIni(std::string_view text, std::string_view path);

}  // namespace tierckpt::s3
