#pragma once
// The driver ↔ worker protocol of the plugin loader: length-prefixed frames on a Unix stream
// socket, a file descriptor (the case arena's memfd) passed with SCM_RIGHTS.
#include "mac/verify/abi_case.hpp"
#include "mac/verify/plugin.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::verify::protocol {

enum Type : uint32_t { kHello = 1, kBegin = 2, kPrefill = 3, kStep = 4, kEnd = 5, kReply = 6 };

/*! Sends one frame (and `fd` if ≥ 0); false if the peer is gone. Never raises SIGPIPE. */
bool send_frame(int sock, uint32_t type, const std::string& payload, int fd = -1);
/*! Receives one frame. `deadline` is a steady-clock time in seconds (≤ 0: wait forever).
 *  Returns 1 on a frame, 0 when the peer closed, -1 on the deadline, -2 on an error. */
int recv_frame(int sock, uint32_t* type, std::string* payload, int* fd, double deadline);
/*! Seconds on the steady clock. */
double now_s();

// Payload codecs.
std::string encode_ranges(const std::vector<abi::Range>& r);
std::vector<abi::Range> decode_ranges(const std::string& s, size_t offset);
std::string encode_reply(const Reply& r, const std::string& extra = {});
Reply decode_reply(const std::string& s, std::string* extra = nullptr);

}  // namespace mac::verify::protocol
