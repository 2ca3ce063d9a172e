// Events: runtime event handles behind c10::Event (torch.Event, <device>.Event). A handle is
// created by the first record, on the stream's device; null means "never recorded", which
// queries as complete and synchronizes at once.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include <c10/util/Exception.h>

#include "runtime/Runtime.h"

namespace BACKEND_NS {

void event_record(void** event, const c10::Stream& stream, c10::DeviceIndex device, bool timing) {
  TORCH_CHECK(device == -1 || device == stream.device_index(), "event device ",
              static_cast<int>(device), " does not match the stream's device ",
              static_cast<int>(stream.device_index()));
  DeviceScope scope(stream.device_index());
  if (*event == nullptr) *event = hal::event_create(timing);
  hal::event_record(*event, native_stream(stream));
}

void event_block(void* event, const c10::Stream& stream) {
  if (event == nullptr) return;
  DeviceScope scope(stream.device_index());
  hal::stream_wait_event(native_stream(stream), event);
}

bool event_query(void* event) { return event == nullptr || hal::event_query(event); }

void event_synchronize(void* event) {
  if (event != nullptr) hal::event_synchronize(event);
}

double event_elapsed_ms(void* start, void* end, c10::DeviceIndex device) {
  TORCH_CHECK(start != nullptr && end != nullptr,
              "both events must be recorded before measuring the time between them");
  DeviceScope scope(device);
  return static_cast<double>(hal::event_elapsed_ms(start, end));
}

void event_destroy(void* event, c10::DeviceIndex device) noexcept {
  if (event == nullptr) return;
  try {
    DeviceScope scope(device);
    hal::event_destroy(event);
  } catch (...) {
  }
}

}  // namespace BACKEND_NS
