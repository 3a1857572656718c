// modular_counter.cpp: the example task plugin. Inputs x_1..x_T are digits in [0, m); the label
// at position t is the running sum (x_1 + ... + x_t) mod m, the state of a mod-m counter. Shows
// every part of a plugin task: parameters, vocabulary, splits, details and a seeded sample().
#include <statebench/plugin.hpp>

namespace {

class ModularCounter {
 public:
  static std::string name() { return "modular_counter"; }
  static std::string summary() { return "running sum of digit inputs modulo m (example plugin)"; }
  static std::vector<sb::plugin::Param> params() {
    return {{"modulus", "5", "m, the counter's modulus: inputs and states are digits 0..m-1 (2..1000)"},
            {"length", "64", "tokens per sequence (1..1048576)"},
            {"labels", "all", "all: the state after every input; final: only after the last input"}};
  }

  explicit ModularCounter(const sb::plugin::Args& args)
      : modulus_(static_cast<int32_t>(args.integer("modulus", 2, 1000))),
        length_(args.integer("length", 1, int64_t{1} << 20)),
        final_only_(args.choice("labels", {"all", "final"}) == "final") {}

  int64_t seq_len() const { return length_; }
  std::vector<std::string> vocab() const {
    std::vector<std::string> tokens;
    for (int32_t d = 0; d < modulus_; ++d) tokens.push_back(std::to_string(d));
    return tokens;
  }
  std::vector<sb::plugin::Split> splits() const {
    return {{"train", false, "inputs uniform over 0..m-1"},
            {"val", true, "inputs uniform over 0..m-1, held out"},
            {"test", true, "inputs uniform over 0..m-1, held out"},
            {"sparse", true, "each input is 0 with probability 0.9 (long runs of an unchanged state)"}};
  }
  std::string details() const {
    return "input token t: a digit x_t; label at t: (x_1 + ... + x_t) mod " + std::to_string(modulus_) +
           (final_only_ ? " at the last position only" : " at every position") +
           "; score mask: every labelled position";
  }

  void sample(int split, sb::Rng& rng, sb::plugin::ExampleSpans out) const {
    const bool sparse = split == 3;
    int32_t state = 0;
    for (int64_t t = 0; t < length_; ++t) {
      int32_t x;
      if (sparse) x = rng.below(10) == 0 ? 1 + static_cast<int32_t>(rng.below(modulus_ - 1)) : 0;
      else x = static_cast<int32_t>(rng.below(modulus_));
      state = (state + x) % modulus_;
      const bool labelled = !final_only_ || t + 1 == length_;
      out.input_ids[t] = x;
      out.labels[t] = labelled ? state : sb::plugin::kIgnoreLabel;
      out.score_mask[t] = labelled ? 1 : 0;
    }
  }

 private:
  int32_t modulus_;
  int64_t length_;
  bool final_only_;
};

}  // namespace

STATEBENCH_PLUGIN(ModularCounter)
