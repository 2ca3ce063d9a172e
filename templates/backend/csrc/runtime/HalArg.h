// hal_arg: converts a value the generated code holds (void* handles, ints, size_t) to the type a
// vendor function declares for that parameter (HAL.cpp, distributed/Collectives.cpp).
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#pragma once

#include <cstdint>
#include <type_traits>

#include "runtime/Config.h"

namespace BACKEND_NS::hal::detail {

template <class To, class From>
To hal_arg(From value) {
  if constexpr (std::is_pointer_v<To> && std::is_pointer_v<From>) {
    return reinterpret_cast<To>(const_cast<void*>(static_cast<const volatile void*>(value)));
  } else if constexpr (std::is_pointer_v<To> && std::is_integral_v<From>) {
    return reinterpret_cast<To>(static_cast<std::uintptr_t>(value));
  } else if constexpr (std::is_integral_v<To> && std::is_pointer_v<From>) {
    return static_cast<To>(reinterpret_cast<std::uintptr_t>(value));
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace BACKEND_NS::hal::detail
