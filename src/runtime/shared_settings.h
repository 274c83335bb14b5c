// The settings every rank of a job must share, compared when the ranks
// join.
//
// Which messages and rounds a collective exchanges follows from its
// arguments, which the call checks across ranks (message signatures, the
// agreement step), and from a few settings of the process: the forced
// algorithms (MESHCOMM_ALGO_<OP>), the pipeline chunk and the hierarchical
// piece (collectives/tuning.h), and whether calls agree on their arguments
// first (MESHCOMM_CHECK, collectives/agreement.h). Ranks that differ in one of those run
// different protocols against each other: a timeout at best, a wrong result
// at worst. So every rank writes its values into its join record and every
// rank compares all of them with rank 0's: a difference fails the join on
// every rank, with the same message, naming the variable and the ranks.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshcomm {

// This process's values as a field of its join record: " shared=<values>"
// (the values never hold a space).
std::string sharedSettingsField();

// "" when every record's values are rank 0's; else what differs, in words
// that end with what to do. `records[r]` is rank r's join record.
std::string sharedSettingsDisagreement(const std::vector<std::string>& records);

}  // namespace meshcomm
