#include "runtime/shared_settings.h"

#include <map>

#include "collectives/agreement.h"
#include "collectives/tuning.h"

namespace meshcomm {
namespace {

constexpr std::string_view kField = " shared=";
// The field's value when every setting is at its default.
constexpr std::string_view kDefaults = "-";

std::string_view valuesOf(std::string_view record) {
  const size_t at = record.find(kField);
  if (at == std::string_view::npos) return kDefaults;
  std::string_view rest = record.substr(at + kField.size());
  return rest.substr(0, rest.find(' '));
}

// "VARIABLE=value,..." -> {VARIABLE: value}.
std::map<std::string, std::string> parse(std::string_view values) {
  std::map<std::string, std::string> out;
  if (values == kDefaults) return out;
  while (!values.empty()) {
    const std::string_view item = values.substr(0, values.find(','));
    const size_t eq = item.find('=');
    out[std::string(item.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(item.substr(eq + 1));
    values.remove_prefix(std::min(values.size(), item.size() + 1));
  }
  return out;
}

std::string describe(const std::map<std::string, std::string>& values, const std::string& variable) {
  auto it = values.find(variable);
  return it == values.end() ? variable + " unset" : variable + "=" + it->second;
}

}  // namespace

std::string sharedSettingsField() {
  std::string values = settingsRanksMustShare();
  // Whether the calls exchange their arguments first: ranks that differ
  // would meet a round of records with a round of data.
  if (!collectives::checking()) {
    if (!values.empty()) values += ',';
    values += "MESHCOMM_CHECK=0";
  }
  return std::string(kField) + (values.empty() ? std::string(kDefaults) : values);
}

std::string sharedSettingsDisagreement(const std::vector<std::string>& records) {
  if (records.empty()) return "";
  const std::string_view first = valuesOf(records.front());
  for (size_t r = 1; r < records.size(); ++r) {
    const std::string_view theirs = valuesOf(records[r]);
    if (theirs == first) continue;
    const auto a = parse(first);
    const auto b = parse(theirs);
    std::string differ;
    auto name = [&](const std::string& variable) {
      differ += (differ.empty() ? "" : "; ") + describe(a, variable) + " on rank 0, " + describe(b, variable) +
                " on rank " + std::to_string(r);
    };
    for (const auto& [variable, value] : a) {
      if (auto it = b.find(variable); it == b.end() || it->second != value) name(variable);
    }
    for (const auto& [variable, value] : b) {
      if (!a.contains(variable)) name(variable);
    }
    return "the ranks run with different settings for how they exchange data: " + differ +
           ". Ranks that differ there would run different protocols against each other; set "
           "MESHCOMM_ALGO_*, MESHCOMM_CHUNK_BYTES, MESHCOMM_HIER_PIECE_BYTES and MESHCOMM_CHECK alike on "
           "every rank, or leave them unset";
  }
  return "";
}

}  // namespace meshcomm
