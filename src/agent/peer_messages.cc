// peer_messages.cc — nothing of its own: the peer control messages are
// declared and encoded in peer/peer_messages.cc; agent/peer_messages.h
// brings their names into the agent's namespace.
#include "agent/peer_messages.h"
