// store_common.h — helpers shared by the ObjectStore implementations: name
// validation of every call, the labels that put the store, namespace, step
// and object into each error, the tree rule of names, and the spelling of
// in-flight temporary files.
//
// Internal to src/store. All functions are pure and thread-safe. Validation
// errors are kInvalidArgument and carry the store and the operation.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::store_internal {

// `<store> namespace "job" step 7`, names escaped for messages.
std::string StepLabel(std::string_view store, std::string_view ns, uint64_t step);
// `<store> namespace "job" step 7 object "dir/file"`.
std::string ObjectLabel(std::string_view store, std::string_view ns, uint64_t step,
                        std::string_view name);

// Validates ns (and step, and name) for operation `op` of `store`; errors
// read "<op> on <store>: <rule>". Reserved object names are rejected: they
// belong to the system (the manifest).
Status ValidateNamespaceFor(std::string_view op, std::string_view store, std::string_view ns);
Status ValidateStepFor(std::string_view op, std::string_view store, std::string_view ns,
                       uint64_t step);
Status ValidateObjectFor(std::string_view op, std::string_view store, std::string_view ns,
                         uint64_t step, std::string_view name);

// Parses the manifest read from `where` (a path or an s3:// URL) for step
// (ns, step): kCorruption if it is damaged or describes another step (the
// files or keys were copied or renamed).
Result<Manifest> ParseStepManifest(std::string_view text, const std::string& where, std::string_view ns,
                                   uint64_t step);

// Adds name to names unless a parent of it is there or it is a parent of
// one there ("a" and "a/b" cannot coexist): kFailedPrecondition then.
Status AddToTree(std::set<std::string>& names, std::string_view name);

// True for a file name ending in ".tmp.<digits>.<digits>" with a non-empty
// stem: the shape FsBlobStore (and WriteFileAtomic) produce.
bool LooksLikeTmpName(std::string_view file_name);

}  // namespace tierckpt::store_internal
