// ini.cc — see ini.h.
#include "s3/ini.h"

#include <cctype>

#include "s3/http.h"

namespace tierckpt::s3 {
namespace {

bool IsIniSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsIniSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsIniSpace(s.back())) s.remove_suffix(1);
  return s;
}

// "profile   foo" → "profile foo".
std::string CollapseSpaces(std::string_view s) {
  std::string out;
  bool in_space = false;
  for (char c : s) {
    if (IsIniSpace(c)) {
      in_space = true;
      continue;
    }
    if (in_space && !out.empty()) out.push_back(' ');
    in_space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

const IniSection* IniFile::Find(std::string_view name) const {
  auto it = sections.find(name);
  return it == sections.end() ? nullptr : &it->second;
}

Result<IniFile> ParseIni(std::string_view text, std::string_view path) {
  IniFile file;
  IniSection* section = nullptr;
  std::string last_key;     // the key indented lines attach to
  bool last_empty = false;  // its value was empty: indented lines are sub-keys
  size_t line_number = 0;
  auto error = [&](std::string_view what) {
    return InvalidArgument(std::string(path) + ":" + std::to_string(line_number) + ": " + std::string(what) +
                           "; fix the file (AWS shared config format: [section] then key = value lines)");
  };
  while (!text.empty()) {
    ++line_number;
    const size_t newline = text.find('\n');
    std::string_view raw = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    const bool indented = IsIniSpace(raw.front());
    if (line.front() == '[') {
      const size_t close = line.find(']');
      if (close == std::string_view::npos) return error("section header without ']'");
      const std::string_view after = Trim(line.substr(close + 1));
      if (!after.empty() && after.front() != '#' && after.front() != ';') {
        return error("text after a section header's ']'");
      }
      std::string name = CollapseSpaces(line.substr(1, close - 1));
      if (name.empty()) return error("empty section name");
      section = &file.sections[name];
      last_key.clear();
      continue;
    }
    if (indented && section != nullptr && !last_key.empty()) {
      if (last_empty) {
        const size_t eq = line.find('=');
        if (eq == std::string_view::npos) return error("indented line without '=' under an empty key");
        const std::string sub = AsciiLower(Trim(line.substr(0, eq)));
        if (sub.empty()) return error("empty sub-key name");
        (*section)[last_key + "." + sub] = std::string(Trim(line.substr(eq + 1)));
      } else {
        std::string& value = (*section)[last_key];
        value += '\n';
        value += line;
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) return error("a line that is neither '[section]' nor 'key = value'");
    if (section == nullptr) return error("'key = value' before any [section]");
    std::string key = AsciiLower(Trim(line.substr(0, eq)));
    if (key.empty()) return error("empty key name");
    std::string value(Trim(line.substr(eq + 1)));
    last_empty = value.empty();
    (*section)[key] = std::move(value);
    last_key = std::move(key);
  }
  return file;
}

}  // namespace tierckpt::s3
