// fmt::format with "{}" placeholders only: what torch's kineto headers (GenericTraceActivity.h)
// use, for torch releases whose wheels ship those headers without {fmt}. setup.py puts this
// directory on the include path only where torch has no fmt/format.h of its own.
// Copied by tdev scaffold as it is: a plain source.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace fmt {

template <class... Args>
std::string format(std::string_view pattern, const Args&... args) {
  std::ostringstream out;
  const auto next = [&](const auto& value) {
    const std::size_t at = pattern.find("{}");
    out << pattern.substr(0, at);
    if (at == std::string_view::npos) {
      pattern = {};
      return;
    }
    out << value;
    pattern.remove_prefix(at + 2);
  };
  (next(args), ...);
  out << pattern;
  return out.str();
}

}  // namespace fmt
