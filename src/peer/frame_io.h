// frame_io.h — whole peer frames (peer_frame.h) on a ByteChannel, shared by
// the handshake and the framed connection.
//
// `who` names the far end in every message ("peer 10.0.0.2:7100 (node n2)").
// End of stream at a frame boundary is kUnavailable ("closed the
// connection"); inside a frame header it is kProtocolError (a truncated
// header); inside a payload it is kUnavailable naming how far the frame got
// (a peer that died mid-message). After any failure except an idle timeout
// (ReadFrameHeader with *idle set) the channel is out of sync and must close.
//
// Thread safety: as the channel's (one reader, one writer).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "peer/byte_channel.h"
#include "peer/peer_frame.h"

namespace tierckpt::peer {

// Writes the header (its payload_len is set to payload.size() + data_size),
// the payload, then data_size bytes at data, in one gathered write: data is
// sent from the caller's memory. Waits at most stall for each bit of progress.
Status WriteFrame(ByteChannel& ch, PeerFrameHeader header, std::string_view payload, Millis stall,
                  std::string_view who, const void* data = nullptr, size_t data_size = 0);

// Reads and checks one header (DecodePeerHeader with `version`). Waits up to
// `first` for its first byte and `stall` for the rest. *idle is set when it
// failed with kTimeout before reading any byte (the channel is still in sync).
Result<PeerFrameHeader> ReadFrameHeader(ByteChannel& ch, Millis first, Millis stall, std::string_view who,
                                        uint16_t version, bool* idle);

// Reads exactly size bytes of the current frame (`what` says which, e.g.
// "the payload of a Control frame"), waiting at most stall between pieces.
Status ReadFrameBytes(ByteChannel& ch, void* buf, size_t size, Millis stall, std::string_view who,
                      std::string_view what);

// Reads the whole payload of a frame whose header was just read.
Result<std::string> ReadPayload(ByteChannel& ch, const PeerFrameHeader& header, Millis stall,
                                std::string_view who);

}  // namespace tierckpt::peer
