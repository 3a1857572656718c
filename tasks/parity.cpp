// parity.cpp: the parity task, the smallest state-tracking problem (a two-state automaton).
// Inputs: `length` uniform bits; vocabulary {"0", "1"}. Label at t (labels=prefix): the parity
// of x_1..x_t, scored everywhere; labels=final: only the last position is labelled and scored.
// bos=true puts a <bos> token (id 2, label -100) first, so T = length + 1.
#include "core/error.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

class Parity final : public Task {
 public:
  Parity(int64_t length, bool prefix, bool bos) : length_(length), prefix_(prefix), bos_(bos) {}

  std::string name() const override { return "parity"; }
  int64_t seq_len() const override { return length_ + (bos_ ? 1 : 0); }
  std::vector<std::string> vocab() const override {
    if (bos_) return {"0", "1", "<bos>"};
    return {"0", "1"};
  }
  std::string details() const override {
    return fmt::format(
        "inputs: {} uniform bits, token id = bit (vocabulary 0 1)\n"
        "labels ({}): {}\n"
        "label token id = parity bit (0 = even number of ones so far, 1 = odd){}",
        length_, prefix_ ? "prefix" : "final",
        prefix_ ? "at every position t, the parity of x_1..x_t; every position is scored"
                : "only the last position, the parity of the whole sequence; other labels -100",
        bos_ ? "\nbos: token 2 (<bos>) at position 0, label -100, not scored; bit t is at position t" : "");
  }

  void sample(int /*split*/, Rng& rng, ExampleView ex) const override {
    ExampleView out = ex;
    if (bos_) {
      ex.input_ids[0] = 2;
      ex.labels[0] = kIgnoreLabel;
      ex.score_mask[0] = 0;
      out = {ex.input_ids + 1, ex.labels + 1, ex.score_mask + 1};
    }
    uint32_t bits = 0;
    int bits_left = 0;
    int32_t parity = 0;
    for (int64_t t = 0; t < length_; ++t) {
      if (bits_left == 0) {
        bits = rng.u32();
        bits_left = 32;
      }
      const int32_t bit = static_cast<int32_t>(bits & 1u);
      bits >>= 1;
      --bits_left;
      parity ^= bit;
      out.input_ids[t] = bit;
      const bool labelled = prefix_ || t == length_ - 1;
      out.labels[t] = labelled ? parity : kIgnoreLabel;
      out.score_mask[t] = labelled ? 1 : 0;
    }
  }

 private:
  int64_t length_;
  bool prefix_, bos_;
};

}  // namespace

void register_parity(TaskRegistry& registry) {
  registry.add({"parity",
                "parity of a bit string: label = parity of the prefix (or of the whole string)",
                {{"length", "64", "bits per sequence (>= 1)"},
                 {"labels", "prefix", "prefix: parity label at every position; final: last position only"},
                 {"bos", "false", "put a <bos> token (id 2, unlabelled) before the bits"}},
                [](const Params& p) -> std::unique_ptr<Task> {
                  const int64_t length = p.integer("length", 1, int64_t{1} << 30);
                  const bool prefix = p.choice("labels", {"prefix", "final"}) == "prefix";
                  return std::make_unique<Parity>(length, prefix, p.flag("bos"));
                },
                "built-in", "length"});
}

}  // namespace sb
