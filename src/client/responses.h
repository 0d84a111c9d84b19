// responses.h — decoding of the agent's JSON response bodies (shapes in
// docs/protocol.md). Pure functions; thread-safe.
//
// Every parser checks the JSON types it relies on and fails with
// kProtocolError naming the request and the field, so a malformed answer is
// reported instead of half-used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/client.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::client {

// The JSON document of a JsonBody-encoded response body.
Result<std::string> JsonFromBody(std::string_view body, std::string_view request);

// List: {"steps":[{"namespace","step","bytes","objects","memory","durable",
// "durable_error"}],"durable_error"}. "memory"/"durable"/"durable_error" may
// be absent or null (= not in that tier / no error). Sorted by (namespace,
// step) on return.
Result<StepListing> ParseStepList(std::string_view json);

// Show: {"manifest":{...},"memory":..,"durable":..,"durable_error":..}.
// Returns the manifest; ns/step name the step for errors and must match the
// manifest's.
Result<Manifest> ParseShowBody(std::string_view json, std::string_view ns, uint64_t step);

// BindDurable: {"namespace","durable"}; returns "durable", the base now used.
Result<std::string> ParseBindDurable(std::string_view json);

// The newest step of ns committed in memory or durable; kNotFound otherwise.
Result<uint64_t> NewestCommittedStep(const std::vector<StepSummary>& steps, std::string_view ns);

}  // namespace tierckpt::client
