// The STEP argument shared by every command that names a step.
#include <memory>
#include <string>

#include "cli.h"
#include "common/names.h"

namespace tierckpt::cli {

CLI::Option* AddStepArgument(CLI::App* command, uint64_t* step) {
  // Taken as text and parsed here: CLI11's integer conversion reads "010" as
  // octal and "0x10" as hexadecimal, and steps are decimal everywhere.
  return command
      ->add_option_function<std::string>(
          "step",
          [step](const std::string& text) {
            Result<uint64_t> parsed = ParseStep(text);
            if (!parsed.ok()) throw CLI::ValidationError("step", parsed.status().message());
            *step = *parsed;
          },
          "step number (decimal, 0 to " + std::to_string(kMaxStep) + ")")
      ->required();
}

CLI::Validator DecimalOnly() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
          return "\"" + text + "\" is not a decimal number (digits 0-9 only)";
        }
        // CLI11 would read a leading 0 as octal: strip it, keeping "0".
        const size_t first = text.find_first_not_of('0');
        text = first == std::string::npos ? "0" : text.substr(first);
        return "";
      },
      "DECIMAL");
}

}  // namespace tierckpt::cli
