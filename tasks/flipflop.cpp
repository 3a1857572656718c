// flipflop.cpp: flip-flop language modelling (Liu et al. 2023, "Exposing Attention Glitches").
// Tokens w r i 0 1; `length` tokens = length/2 instruction/bit pairs, first w, last r. Labels:
// loss=reads (Liu et al.'s "clean" mode, the default) only at each r, whose next token is the last
// written bit; loss=all next-token labels everywhere. The score mask marks each r in both modes.
// Splits: train and val use the configured probabilities; sparse (p_ignore 0.98) and dense (0.1).
#include <cmath>

#include "core/error.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

enum Token : int32_t { kW = 0, kR = 1, kI = 2, kZero = 3, kOne = 4 };

struct Mix {
  double p_write, p_read, p_ignore;
};

class FlipFlop final : public Task {
 public:
  FlipFlop(int64_t length, Mix mix, bool reads_only) : length_(length), mix_(mix), reads_only_(reads_only) {}

  std::string name() const override { return "flipflop"; }
  int64_t seq_len() const override { return length_; }
  std::vector<std::string> vocab() const override { return {"w", "r", "i", "0", "1"}; }
  std::vector<SplitSpec> splits() const override {
    return {{"train", false, fmt::format("p_ignore={:g} (the configured mix)", mix_.p_ignore)},
            {"val", true, fmt::format("p_ignore={:g}, held out (in-distribution)", mix_.p_ignore)},
            {"sparse", true, "p_ignore=0.98: long write-to-read distances"},
            {"dense", true, "p_ignore=0.1: short distances"}};
  }
  std::string details() const override {
    return fmt::format(
        "sequence: {} instruction/bit pairs; first instruction w, last r; P(w)={:g} P(r)={:g} P(i)={:g}\n"
        "labels: {}\n"
        "score mask: each r (target = the bit after it, which equals the last written bit)",
        length_ / 2, mix_.p_write, mix_.p_read, mix_.p_ignore,
        reads_only_ ? "loss=reads: only at each r, the bit after it (Liu et al.'s \"clean\" mode, their reported "
                      "protocol); every other position -100"
                    : "loss=all: the next token at every position (Liu et al.'s \"noisy\" mode; the last is -100)");
  }

  void sample(int split, Rng& rng, ExampleView out) const override {
    const Mix mix = split == 2 ? Mix{0.01, 0.01, 0.98} : split == 3 ? Mix{0.45, 0.45, 0.1} : mix_;
    // Instruction thresholds on a 32-bit draw: u < tw -> w, u < tw + tr -> r, else i.
    const uint64_t tw = static_cast<uint64_t>(std::ldexp(mix.p_write, 32));
    const uint64_t twr = static_cast<uint64_t>(std::ldexp(mix.p_write + mix.p_read, 32));
    const int64_t pairs = length_ / 2;
    int32_t* seq = out.input_ids;
    int32_t memory = kZero;
    uint32_t bits = 0;
    int bits_left = 0;
    auto next_bit = [&]() -> int32_t {
      if (bits_left == 0) {
        bits = rng.u32();
        bits_left = 32;
      }
      const int32_t b = static_cast<int32_t>(bits & 1u);
      bits >>= 1;
      --bits_left;
      return kZero + b;
    };
    for (int64_t p = 0; p < pairs; ++p) {
      int32_t instr;
      if (p == 0) {
        instr = kW;
      } else if (p == pairs - 1) {
        instr = kR;
      } else {
        const uint64_t u = rng.u32();
        instr = u < tw ? kW : (u < twr ? kR : kI);
      }
      const int32_t bit = instr == kR ? memory : next_bit();
      if (instr == kW) memory = bit;
      seq[2 * p] = instr;
      seq[2 * p + 1] = bit;
    }
    for (int64_t t = 0; t + 1 < length_; ++t) {
      const bool read = seq[t] == kR;
      out.labels[t] = read || !reads_only_ ? seq[t + 1] : kIgnoreLabel;
      out.score_mask[t] = read;
    }
    out.labels[length_ - 1] = kIgnoreLabel;
    out.score_mask[length_ - 1] = 0;
  }

 private:
  int64_t length_;
  Mix mix_;
  bool reads_only_;  // loss=reads
};

Mix read_mix(const Params& p) {
  const bool gw = p.given("p_write"), gr = p.given("p_read"), gi = p.given("p_ignore");
  if (!gw && !gr) {
    const double pi = p.real("p_ignore", 0.0, 1.0);
    return {(1 - pi) / 2, (1 - pi) / 2, pi};
  }
  if (static_cast<int>(gw) + static_cast<int>(gr) + static_cast<int>(gi) < 2)
    fail("task 'flipflop': give two or three of p_write, p_read, p_ignore (only one was given)");
  double pw = gw ? p.real("p_write", 0.0, 1.0) : 0.0;
  double pr = gr ? p.real("p_read", 0.0, 1.0) : 0.0;
  double pi = gi ? p.real("p_ignore", 0.0, 1.0) : 0.0;
  if (!gw) pw = 1 - pr - pi;
  if (!gr) pr = 1 - pw - pi;
  if (!gi) pi = 1 - pw - pr;
  const double sum = pw + pr + pi;
  if (pw < -1e-12 || pr < -1e-12 || pi < -1e-12 || std::fabs(sum - 1.0) > 1e-9)
    fail("task 'flipflop': p_write={:g} + p_read={:g} + p_ignore={:g} = {:g}, must be non-negative and sum to 1",
         pw, pr, pi, sum);
  return {std::max(pw, 0.0), std::max(pr, 0.0), std::max(pi, 0.0)};
}

}  // namespace

void register_flipflop(TaskRegistry& registry) {
  registry.add({"flipflop",
                "flip-flop language modelling: remember the last written bit (Liu et al. 2023)",
                {{"length", "512", "tokens per sequence (even, >= 4): length/2 instruction/bit pairs"},
                 {"p_ignore", "0.8", "probability of an ignore instruction; w and r share the rest"},
                 {"p_write", "", "probability of a write (give with p_read and/or p_ignore)"},
                 {"p_read", "", "probability of a read (give with p_write and/or p_ignore)"},
                 {"loss", "reads",
                  "reads: labels only at each r (the bit after it; Liu et al.'s clean mode); all: next token everywhere"}},
                [](const Params& p) -> std::unique_ptr<Task> {
                  const int64_t length = p.integer("length", 4, int64_t{1} << 30);
                  if (length % 2 != 0) p.bad("length", "must be even (instruction/bit pairs)");
                  const bool reads_only = p.choice("loss", {"reads", "all"}) == "reads";
                  return std::make_unique<FlipFlop>(length, read_mix(p), reads_only);
                },
                "built-in", "length"});
}

}  // namespace sb
