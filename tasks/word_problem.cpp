// word_problem.cpp: group word problems (Merrill, Petty, Sabharwal 2024, "The Illusion of State in
// State-Space Models"). Inputs x_1..x_k are group elements; labels: each prefix product p_t =
// x_1*...*x_t (apply x_1 first; perm_group.hpp), only p_k (final), or whether p_k = e (identity,
// balanced: identity_words.hpp); optionally short training words (Merrill's length-2 data). Tokens:
// element ids, then "<bos>" when bos=true, then labels=identity's two answer tokens.
#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "tasks/identity_words.hpp"
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

enum class Labels { kPrefix, kFinal, kIdentity };

struct WordProblemConfig {
  int64_t length = 0;
  Labels labels = Labels::kPrefix;
  bool bos = false, generators_only = false;
  double identity_fraction = 0.5;  // labels=identity: P(the word is drawn from the identity words)
  double short_fraction = 0;       // P(a train example is a short word)
  int64_t short_length = 2;
};

class WordProblem final : public Task {
 public:
  WordProblem(PermGroup group, WordProblemConfig c) : group_(std::move(group)), c_(c), length_(c.length) {
    if (c_.labels == Labels::kIdentity) {
      std::vector<int32_t> alphabet = group_.generators();
      if (!c_.generators_only) {
        alphabet.resize(static_cast<size_t>(group_.order()));
        for (int32_t a = 0; a < group_.order(); ++a) alphabet[static_cast<size_t>(a)] = a;
      }
      words_.emplace(group_, std::move(alphabet), !c_.generators_only, length_);
    }
  }

  // Checks that each class labels=identity draws exists at this length (throws sb::Error naming
  // `key`); e.g. words of odd length over transpositions are never the identity.
  void check_identity_classes(int64_t length, const char* key, const Params& p) const {
    const double pe = words_->identity_probability(length);
    if (c_.identity_fraction > 0 && pe <= 0)
      p.bad(key, fmt::format("no word of {} letters over the input alphabet of group '{}' is the identity (e.g. "
                             "odd-length words of odd permutations), so identity_fraction={:g} cannot be met",
                             length, group_.spec(), c_.identity_fraction));
    if (c_.identity_fraction < 1 && pe >= 1)
      p.bad(key, fmt::format("every word of {} letters over the input alphabet of group '{}' is the identity",
                             length, group_.spec()));
  }

  std::string name() const override { return "word_problem"; }
  int64_t seq_len() const override { return length_ + (c_.bos ? 1 : 0); }
  std::vector<std::string> vocab() const override {
    std::vector<std::string> v = group_.names();
    if (c_.bos) v.push_back("<bos>");
    if (c_.labels == Labels::kIdentity) v.insert(v.end(), {"<not_identity>", "<identity>"});
    return v;
  }
  std::string details() const override {
    std::string inputs = "uniform over all elements";
    if (c_.generators_only) {
      inputs = "uniform over the generators {";
      for (size_t i = 0; i < group_.generators().size(); ++i)
        inputs += fmt::format("{}{}", i ? "; " : "", group_.name(group_.generators()[i]));
      inputs += "}";
    }
    std::string labels = "at every element position t the prefix product p_t = x_1*...*x_t; all scored";
    if (c_.labels == Labels::kFinal) labels = "only the last position, p_k = x_1*...*x_k (the others -100); scored there";
    if (c_.labels == Labels::kIdentity)
      labels = fmt::format(
          "only the last position: <identity> = {} if p_k = x_1*...*x_k is the identity e, else <not_identity> = {} "
          "(the others -100); scored there\n"
          "balanced sampler: with probability identity_fraction={:g} the word is uniform among the words over the "
          "input alphabet that evaluate to e, else uniform among those that do not (uniform words would be e with "
          "probability {:.4g} at this length). Exact conditional sampling: {}",
          answer_token(false) + 1, answer_token(false), c_.identity_fraction, words_->identity_probability(length_),
          c_.generators_only
              ? "letter by letter, each weighted by the probability that a uniform completion reaches (or avoids) e"
              : "x_1..x_(k-1) uniform, x_k the inverse of their product (or uniform among the other elements)");
    std::string shorts;
    if (c_.short_fraction > 0)
      shorts = fmt::format(
          "\nshort words (train split only): each train example is, with probability short_fraction={:g}, a word of "
          "short_length={} letters drawn as above ({}); the positions after it hold "
          "further uniform inputs with label -100 and score mask 0, which a causal model cannot use for the labelled "
          "ones. Merrill et al. train on all length-2 words beside their length-k ones (A5: 3600 beside 800k, a "
          "fraction of about 0.0045); here short words are drawn uniformly with replacement, not enumerated",
          c_.short_fraction, c_.short_length,
          c_.labels == Labels::kPrefix  ? "labelled at each of its letters"
          : c_.labels == Labels::kFinal ? "its product labelled at its last letter"
                                        : "its identity label at its last letter");
    return fmt::format(
        "sequence: {}{} group elements x_1..x_{}, {}\n"
        "labels: {}{}\n"
        "vocabulary: token id = element id (table below){}{}\n{}",
        c_.bos ? "<bos> then " : "", length_, length_, inputs, labels, shorts,
        c_.bos ? fmt::format(", then <bos> = {} (label -100)", group_.order()) : std::string(),
        c_.labels == Labels::kIdentity
            ? fmt::format(", then the answers <not_identity> = {} and <identity> = {}", answer_token(false),
                          answer_token(true))
            : std::string(),
        group_.describe());
  }

  void sample(int split, Rng& rng, ExampleView out) const override {
    int32_t* in = out.input_ids;
    int32_t* labels = out.labels;
    uint8_t* mask = out.score_mask;
    if (c_.bos) {
      in[0] = group_.order();
      labels[0] = kIgnoreLabel;
      mask[0] = 0;
      ++in, ++labels, ++mask;
    }
    // Split 0 is train (the default splits); short words never reach the evaluation splits.
    const int64_t m = split == 0 && c_.short_fraction > 0 && rng.bernoulli(c_.short_fraction) ? c_.short_length
                                                                                                : length_;
    if (c_.labels == Labels::kIdentity) {
      sample_identity(rng, m, in, labels, mask);
      return;
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
    if (c_.generators_only) {
      const int32_t* gens = group_.generators().data();
      const uint32_t count = static_cast<uint32_t>(group_.generators().size());
      run([&] { return static_cast<uint32_t>(gens[rng.below(count)]); });
    } else {
      run([&] { return rng.below(G); });
    }
    // A short word of m letters is the first m letters of this one; labels only on them.
    for (int64_t t = 0; t < length_; ++t) {
      const bool labelled = t < m && (c_.labels == Labels::kPrefix || t == m - 1);
      if (!labelled) labels[t] = kIgnoreLabel;
      mask[t] = labelled;
    }
  }

 private:
  int32_t answer_token(bool identity) const {
    return group_.order() + (c_.bos ? 1 : 0) + (identity ? 1 : 0);
  }

  // labels=identity: the first m letters from the balanced sampler, then (short words) uniform
  // unlabelled letters; one label at letter m.
  void sample_identity(Rng& rng, int64_t m, int32_t* in, int32_t* labels, uint8_t* mask) const {
    const bool identity = rng.bernoulli(c_.identity_fraction);
    words_->draw(rng, m, identity, in);
    const auto& gens = group_.generators();
    for (int64_t t = m; t < length_; ++t)
      in[t] = c_.generators_only ? gens[rng.below(static_cast<uint32_t>(gens.size()))]
                                 : static_cast<int32_t>(rng.below(static_cast<uint32_t>(group_.order())));
    std::fill(labels, labels + length_, kIgnoreLabel);
    std::fill(mask, mask + length_, uint8_t{0});
    labels[m - 1] = answer_token(identity);
    mask[m - 1] = 1;
  }

  PermGroup group_;
  WordProblemConfig c_;
  int64_t length_;
  std::optional<ConditionedWords> words_;  // labels=identity only; refers to group_
};

}  // namespace

void register_word_problem(TaskRegistry& registry) {
  registry.add({"word_problem",
                "group word problem: label each prefix product of permutation-group elements (Merrill et al. 2024)",
                {{"group", "S5",
                  "S<n>, A<n>, Z<n>, products joined by 'x' (A4xZ5), or a YAML file of generators (.yaml or a path)"},
                 {"length", "64", "number of group elements k per sequence"},
                 {"labels", "prefix",
                  "prefix: label p_t at every position; final: only p_k at the last position; identity: one label at "
                  "the last position, is p_k the identity (balanced classes)"},
                 {"identity_fraction", "0.5",
                  "labels=identity: fraction of words drawn among those that evaluate to the identity, in [0, 1]"},
                 {"bos", "false", "prepend a <bos> token (label -100); T = length + 1"},
                 {"inputs", "all", "all: x_t uniform over the group; generators: uniform over its generating set"},
                 {"short_fraction", "0",
                  "fraction of train examples that are short words (labels on their first short_length letters "
                  "only), as Merrill et al. add all length-2 words; 0 = none"},
                 {"short_length", "2", "letters of a short word, in [1, length) (with short_fraction > 0)"}},
                [](const Params& p) -> std::unique_ptr<Task> {
                  WordProblemConfig c;
                  c.length = p.integer("length", 1, int64_t{1} << 30);
                  const std::string labels = p.choice("labels", {"prefix", "final", "identity"});
                  c.labels = labels == "identity" ? Labels::kIdentity
                             : labels == "final"  ? Labels::kFinal
                                                  : Labels::kPrefix;
                  c.bos = p.flag("bos");
                  c.generators_only = p.choice("inputs", {"all", "generators"}) == "generators";
                  c.identity_fraction = p.real("identity_fraction", 0.0, 1.0);
                  if (p.given("identity_fraction") && c.labels != Labels::kIdentity)
                    p.bad("identity_fraction", fmt::format("applies to labels=identity only (labels={})", labels));
                  c.short_fraction = p.real("short_fraction", 0.0, 1.0);
                  c.short_length = p.integer("short_length", 1, int64_t{1} << 30);
                  if (p.given("short_length") && c.short_fraction == 0)
                    p.bad("short_length", "applies only with short_fraction > 0");
                  if (c.short_fraction > 0 && c.short_length >= c.length)
                    p.bad("short_length", fmt::format("must be shorter than length = {}", c.length));
                  PermGroup group = [&] {
                    try {
                      return PermGroup::parse(p.str("group"));
                    } catch (const Error& e) {
                      p.bad("group", e.what());
                    }
                  }();
                  if (c.generators_only && group.generators().size() < 2)
                    p.bad("inputs", fmt::format("group '{}' has a single generator, so every sequence would be the "
                                                "same (use inputs=all)", group.spec()));
                  auto task = [&] {
                    try {
                      return std::make_unique<WordProblem>(std::move(group), c);
                    } catch (const Error& e) {
                      p.bad("length", e.what());
                    }
                  }();
                  if (c.labels == Labels::kIdentity) {
                    task->check_identity_classes(c.length, "length", p);
                    if (c.short_fraction > 0) task->check_identity_classes(c.short_length, "short_length", p);
                  }
                  return task;
                },
                "built-in", "length"});
}

}  // namespace sb
