// word_problem.cpp: group word problems (Merrill, Petty, Sabharwal 2024, "The Illusion of State in
// State-Space Models"). Inputs x_1..x_k are group elements; the label at position t is the prefix
// product p_t = x_1*x_2*...*x_t (apply x_1 first; see perm_group.hpp), or only p_k with
// labels=final. One token per element (id = element id), then "<bos>" when bos=true.
#include <algorithm>

#include "core/error.hpp"
#include "tasks/perm_group.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

// Tables up to this order (2 * 512^2 bytes = 512 KiB) stay cache resident: one chained lookup per
// token, fused with the draw, is fastest. Larger ones (up to 50 MB for S7) miss the cache on
// nearly every lookup, so their chain is split (prefix_products_interleaved).
constexpr uint32_t kChainedMaxOrder = 512;

// prefix[t] = x[0] * x[1] * ... * x[t] for tables beyond the caches: kChunks chunks of the word
// are multiplied out in lockstep, so their cache misses overlap, then every chunk is
// left-multiplied by the product of the chunks before it (independent lookups). Exact: the
// product is associative.
void prefix_products_interleaved(const uint16_t* table,  // [G, G]
                                 uint32_t G,
                                 const int32_t* x,        // [k]
                                 int32_t* prefix,         // [k] out
                                 int64_t k) {
  constexpr int kChunks = 8;
  const int64_t span = (k + kChunks - 1) / kChunks;
  uint32_t local[kChunks] = {};  // running product within each chunk
  for (int64_t i = 0; i < span; ++i)
    for (int c = 0; c < kChunks; ++c) {
      const int64_t t = c * span + i;
      if (t >= k) break;
      local[c] = table[local[c] * G + static_cast<uint32_t>(x[t])];
      prefix[t] = static_cast<int32_t>(local[c]);
    }
  uint32_t before = local[0];  // product of chunks 0..c-1
  for (int c = 1; c < kChunks && c * span < k; ++c) {
    const int64_t end = std::min(k, (c + 1) * span);
    for (int64_t t = c * span; t < end; ++t) prefix[t] = table[before * G + static_cast<uint32_t>(prefix[t])];
    before = static_cast<uint32_t>(prefix[end - 1]);
  }
}

class WordProblem final : public Task {
 public:
  WordProblem(PermGroup group, int64_t length, bool final_only, bool bos, bool generators_only)
      : group_(std::move(group)), length_(length), final_only_(final_only), bos_(bos),
        generators_only_(generators_only) {}

  std::string name() const override { return "word_problem"; }
  int64_t seq_len() const override { return length_ + (bos_ ? 1 : 0); }
  std::vector<std::string> vocab() const override {
    std::vector<std::string> v = group_.names();
    if (bos_) v.push_back("<bos>");
    return v;
  }
  std::string details() const override {
    std::string inputs = "uniform over all elements";
    if (generators_only_) {
      inputs = "uniform over the generators {";
      for (size_t i = 0; i < group_.generators().size(); ++i)
        inputs += fmt::format("{}{}", i ? "; " : "", group_.name(group_.generators()[i]));
      inputs += "}";
    }
    return fmt::format(
        "sequence: {}{} group elements x_1..x_{}, {}\n"
        "labels: {}\n"
        "vocabulary: token id = element id (table below){}\n{}",
        bos_ ? "<bos> then " : "", length_, length_, inputs,
        final_only_ ? "only the last position, p_k = x_1*...*x_k (the others -100); scored there"
                    : "at every element position t the prefix product p_t = x_1*...*x_t; all scored",
        bos_ ? fmt::format(", then <bos> = {} (label -100)", group_.order()) : std::string(), group_.describe());
  }

  void sample(int split, Rng& rng, ExampleView out) const override {
    int32_t* in = out.input_ids;
    int32_t* labels = out.labels;
    uint8_t* mask = out.score_mask;
    if (bos_) {
      in[0] = group_.order();
      labels[0] = kIgnoreLabel;
      mask[0] = 0;
      ++in, ++labels, ++mask;
    }
    const uint32_t G = static_cast<uint32_t>(group_.order());
    const uint16_t* table = group_.table();  // [G, G]
    auto run = [&](auto draw) {
      if (G <= kChainedMaxOrder) {  // one dependent lookup per token, fused with the draw
        uint32_t state = 0;         // p_0 = e
        for (int64_t t = 0; t < length_; ++t) {
          const uint32_t x = draw();
          state = table[state * G + x];
          in[t] = static_cast<int32_t>(x);
          labels[t] = static_cast<int32_t>(state);
        }
      } else {
        for (int64_t t = 0; t < length_; ++t) in[t] = static_cast<int32_t>(draw());
        prefix_products_interleaved(table, G, in, labels, length_);
      }
    };
    if (generators_only_) {
      const int32_t* gens = group_.generators().data();
      const uint32_t count = static_cast<uint32_t>(group_.generators().size());
      run([&] { return static_cast<uint32_t>(gens[rng.below(count)]); });
    } else {
      run([&] { return rng.below(G); });
    }
    if (final_only_) {
      for (int64_t t = 0; t + 1 < length_; ++t) {
        labels[t] = kIgnoreLabel;
        mask[t] = 0;
      }
      mask[length_ - 1] = 1;
    } else {
      for (int64_t t = 0; t < length_; ++t) mask[t] = 1;
    }
  }

 private:
  PermGroup group_;
  int64_t length_;
  bool final_only_, bos_, generators_only_;
};

}  // namespace

void register_word_problem(TaskRegistry& registry) {
  registry.add({"word_problem",
                "group word problem: label each prefix product of permutation-group elements (Merrill et al. 2024)",
                {{"group", "S5",
                  "S<n>, A<n>, Z<n>, products joined by 'x' (A4xZ5), or a YAML file of generators (.yaml or a path)"},
                 {"length", "64", "number of group elements k per sequence"},
                 {"labels", "prefix", "prefix: label p_t at every position; final: only p_k at the last position"},
                 {"bos", "false", "prepend a <bos> token (label -100); T = length + 1"},
                 {"inputs", "all", "all: x_t uniform over the group; generators: uniform over its generating set"}},
                [](const Params& p) -> std::unique_ptr<Task> {
                  const int64_t length = p.integer("length", 1, int64_t{1} << 30);
                  const bool final_only = p.choice("labels", {"prefix", "final"}) == "final";
                  const bool bos = p.flag("bos");
                  const bool generators_only = p.choice("inputs", {"all", "generators"}) == "generators";
                  PermGroup group = [&] {
                    try {
                      return PermGroup::parse(p.str("group"));
                    } catch (const Error& e) {
                      p.bad("group", e.what());
                    }
                  }();
                  if (generators_only && group.generators().size() < 2)
                    p.bad("inputs", fmt::format("group '{}' has a single generator, so every sequence would be the "
                                                "same (use inputs=all)", group.spec()));
                  return std::make_unique<WordProblem>(std::move(group), length, final_only, bos, generators_only);
                }});
}

}  // namespace sb
