// socket_path.h — where the agent listens and clients connect when neither
// names a socket: the one rule both sides use (tierckptd's --socket default,
// tierckpt::DefaultSocketPath for the client API, the CLI and Python).
//
// In order: $TIERCKPT_SOCKET when set and not empty;
// $XDG_RUNTIME_DIR/tierckpt/agent.sock when that is set; for root
// /run/tierckpt/agent.sock (only root may write /run, so no user can claim
// it first); for others /tmp/tierckpt-<euid>/agent.sock, a directory the
// agent and clients refuse unless that uid owns it privately
// (CheckSocketDir in wire/unix_socket.h).
//
// Thread safety: reads the environment; safe while nobody calls setenv.
#pragma once

#include <string>

namespace tierckpt::wire {

std::string DefaultSocketPath();

}  // namespace tierckpt::wire
