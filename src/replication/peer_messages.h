// peer_messages.h — the agent's names for the peer control messages. They
// are declared once, with the frames of the peer protocol, in
// peer/peer_messages.h (what each message carries, its number and its name);
// the agent's services (peer_service.cc, peer_store.cc, replicator.cc) use
// them through these names. Pure functions; thread-safe.
#pragma once

#include "peer/peer_messages.h"

namespace tierckpt::agent {

using peer::DecodePeerError;
using peer::DecodePeerRequest;
using peer::DecodeSteps;
using peer::DropReplicaAnswer;
using peer::EncodePeerError;
using peer::EncodePeerRequest;
using peer::EncodeSteps;
using peer::PeerMsg;
using peer::PeerMsgName;
using peer::PeerRequest;

}  // namespace tierckpt::agent
