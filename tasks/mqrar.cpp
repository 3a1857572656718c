// mqrar.cpp: multi-query repeated associative recall, N-back (MQRAR-N, as used by the PaTH paper,
// Yang et al. 2025, arXiv 2505.16381). The paper's generator was not available to us; this is a
// construction faithful to its description, built on Zoology's MQAR layout (mqar.cpp):
//  - K distinct keys from [1, V/2). layout varied (default): key j is assigned a_j times, a_j
//    uniform in [N, A] independently per key (A = `assignments`, default N+3), so the answer is the
//    key's assignment number a_j-N+1, which varies: only counting back from the query finds it.
//    layout fixed: every key is assigned exactly A times (default N+1; the answer is then always
//    assignment A-N+1). The M = sum a_j assignments appear in a uniformly random order (a uniform
//    permutation of the multiset) as key/value token pairs, positions 0..2M-1; all M values are
//    distinct tokens of [V/2, V).
//  - then Zoology's query region: (L - 2M)/2 two-token slots (key, filler 0), K queries (each key
//    once) at power-law gaps, P(g) proportional to (g+1)^(a-1), drawn without replacement.
//  - label at a query key = the N-th most recent value assigned to that key before the query;
//    -100 elsewhere; score mask = the K query positions.
//  - query_order zoology: the i-th drawn gap queries the i-th distinct key by first appearance in
//    the context; shuffled: keys assigned to the drawn gaps in a uniformly random order.
#include "core/error.hpp"
#include "tasks/recall_sampling.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

struct MqrarConfig {
  int32_t vocab;
  int64_t length;
  int32_t num_kv_pairs;  // K distinct keys
  int32_t n_back;        // N
  bool varied;           // layout varied: a_j uniform in [N, A]; fixed: a_j = A
  int32_t assignments;   // A >= N (varied: A > N)
  double power_a;
  bool random_non_queries;
  recall::QueryOrder order;
  std::string order_name;
};

class Mqrar final : public Task {
 public:
  explicit Mqrar(MqrarConfig c)
      : c_(std::move(c)), gaps_((c_.length - 2 * min_context_pairs()) / 2, c_.power_a) {}

  std::string name() const override { return "mqrar"; }
  int64_t seq_len() const override { return c_.length; }
  std::vector<std::string> vocab() const override { return recall::recall_vocab(c_.vocab); }
  std::string details() const override {
    const int32_t K = c_.num_kv_pairs, N = c_.n_back, A = c_.assignments, half = c_.vocab / 2;
    const int64_t lo = min_context_pairs(), hi = max_context_pairs();
    const std::string layout =
        c_.varied
            ? fmt::format("layout varied: key j is assigned a_j times, a_j uniform in [N, A] = [{}, {}] independently "
                          "per key; the answer is the key's assignment number a_j-N+1, uniform in [1, {}], so only "
                          "counting back from the query finds it; M = sum a_j in [{}, {}]",
                          N, A, A - N + 1, lo, hi)
            : fmt::format("layout fixed: every key is assigned A={} times (M = {}); the answer is always the key's "
                          "assignment number {} of {} (a rule counting from the first assignment also finds it)",
                          A, hi, A - N + 1, A);
    return fmt::format(
        "vocabulary: {} tokens: 0 = filler '_', keys [1, {}), values [{}, {})\n"
        "{}\n"
        "context: positions 0..2M-1: M key/value pairs; K={} distinct keys; the M assignments in a uniformly random "
        "order; all M values distinct\n"
        "query region: positions 2M..{}: (L-2M)/2 two-token slots (key, filler 0; {} slots when M = {}); each key "
        "queried once, at gaps drawn without replacement with P(g) proportional to (g+1)^(a-1), a={:g}\n"
        "query order: {} ({})\n"
        "labels: at each query key, the N-th most recent value assigned to that key before it, N={}; -100 elsewhere; "
        "score mask = the K query positions\n"
        "random_non_queries={}: {}\n"
        "reference: MQRAR-N of the PaTH paper (arXiv 2505.16381, setting K=32, L=768, N=1..4); its generator "
        "was not available, so this layout extends Zoology's MQAR (see the mqar task)",
        c_.vocab, half, half, c_.vocab, layout, K, c_.length - 1, (c_.length - 2 * hi) / 2, hi, c_.power_a,
        c_.order_name,
        c_.order == recall::QueryOrder::kZoology
            ? "the i-th drawn gap queries the i-th distinct key by first appearance"
            : "keys assigned to the drawn gaps in a uniformly random order",
        N, c_.random_non_queries,
        c_.random_non_queries ? "every filler 0 replaced by a uniform token of [0, V)" : "filler positions stay 0");
  }

  void sample(int split, Rng& rng, ExampleView out) const override {
    const int32_t K = c_.num_kv_pairs, A = c_.assignments, N = c_.n_back, half = c_.vocab / 2;
    thread_local std::vector<int32_t> count, fresh_keys, values, owner, key_of, seen, keys, answers;
    // count[o]: how many times key o is assigned (o numbers the keys before their first appearance).
    count.assign(static_cast<size_t>(K), A);
    int32_t M = K * A;
    if (c_.varied) {
      M = 0;
      for (int32_t o = 0; o < K; ++o) {
        count[static_cast<size_t>(o)] = N + static_cast<int32_t>(rng.below(static_cast<uint32_t>(A - N + 1)));
        M += count[static_cast<size_t>(o)];
      }
    }
    fresh_keys.resize(static_cast<size_t>(K));
    values.resize(static_cast<size_t>(M));
    owner.resize(static_cast<size_t>(M));
    recall::sample_distinct(rng, 1, half - 1, K, fresh_keys.data());
    recall::sample_distinct(rng, half, c_.vocab - half, M, values.data());
    // owner[m]: which key makes assignment m; a uniform permutation of count[o] copies of each o.
    if (c_.varied) {
      int32_t m = 0;
      for (int32_t o = 0; o < K; ++o)
        for (int32_t r = 0; r < count[static_cast<size_t>(o)]; ++r) owner[static_cast<size_t>(m++)] = o;
    } else {
      for (int32_t m = 0; m < M; ++m) owner[static_cast<size_t>(m)] = m % K;
    }
    recall::shuffle(rng, owner.data(), M);
    // Keys are numbered by first appearance: the j-th new key in the context gets fresh_keys[j].
    key_of.assign(static_cast<size_t>(K), -1);
    seen.assign(static_cast<size_t>(K), 0);
    keys.resize(static_cast<size_t>(K));
    answers.resize(static_cast<size_t>(K));
    int32_t distinct = 0;
    for (int32_t m = 0; m < M; ++m) {
      const auto o = static_cast<size_t>(owner[static_cast<size_t>(m)]);
      if (key_of[o] < 0) {
        key_of[o] = distinct;
        keys[static_cast<size_t>(distinct)] = fresh_keys[static_cast<size_t>(distinct)];
        ++distinct;
      }
      const auto j = static_cast<size_t>(key_of[o]);
      const int32_t value = values[static_cast<size_t>(m)];
      if (seen[o]++ == count[o] - N) answers[j] = value;  // 0-based assignment number count-N: N-th most recent
      out.input_ids[2 * m] = keys[j];
      out.input_ids[2 * m + 1] = value;
    }
    recall::write_queries(rng, gaps_, c_.order, keys.data(), answers.data(), K, 2 * int64_t{M}, c_.length, out);
    if (c_.random_non_queries) recall::fill_zeros_with_random_tokens(rng, c_.vocab, out.input_ids, c_.length);
  }

 private:
  int64_t min_context_pairs() const { return int64_t{c_.num_kv_pairs} * (c_.varied ? c_.n_back : c_.assignments); }
  int64_t max_context_pairs() const { return int64_t{c_.num_kv_pairs} * c_.assignments; }

  MqrarConfig c_;
  recall::PowerLawGaps gaps_;  // over the query slots of the shortest context
};

MqrarConfig read_mqrar_config(const Params& p) {
  MqrarConfig c;
  c.vocab = static_cast<int32_t>(p.integer("vocab", 4, int64_t{1} << 30));
  c.length = p.integer("length", 4, int64_t{1} << 30);
  c.num_kv_pairs = static_cast<int32_t>(p.integer("num_kv_pairs", 1, int64_t{1} << 30));
  c.n_back = static_cast<int32_t>(p.integer("n_back", 1, int64_t{1} << 20));
  c.varied = p.choice("layout", {"varied", "fixed"}) == "varied";
  c.assignments = p.has_value("assignments") ? static_cast<int32_t>(p.integer("assignments", 1, int64_t{1} << 20))
                                             : c.n_back + (c.varied ? 3 : 1);
  c.power_a = p.real("power_a");
  c.random_non_queries = p.flag("random_non_queries");
  c.order_name = p.choice("query_order", {"zoology", "shuffled"});
  c.order = recall::parse_query_order(c.order_name);
  const int64_t K = c.num_kv_pairs, L = c.length, A = c.assignments, M = K * A;  // M: the longest context
  if (!(c.power_a > 0)) p.bad("power_a", "must be > 0 (P(g) proportional to (g+1)^(a-1); 1 = uniform)");
  if (A < c.n_back)
    p.bad("assignments", fmt::format("each key must be assigned at least n_back = {} times", c.n_back));
  if (c.varied && A == c.n_back)
    p.bad("assignments", fmt::format("layout=varied draws each key's count from [n_back, assignments] = [{}, {}], a "
                                     "single value: give assignments > n_back, or layout=fixed", c.n_back, A));
  if (L % 2 != 0) p.bad("length", "must be even (two-token key/value pairs and query slots)");
  if (2 * M > L)
    p.bad("length", fmt::format("the longest context, 2*num_kv_pairs*assignments = {} tokens, exceeds length {}",
                                2 * M, L));
  if ((L - 2 * M) / 2 < K)
    p.bad("length", fmt::format("only {} query slots after a {}-token context; {} queries (num_kv_pairs) need "
                                "length >= 2*num_kv_pairs*(assignments+1) = {}", (L - 2 * M) / 2, 2 * M, K,
                                2 * K * (A + 1)));
  const int64_t half = c.vocab / 2;
  if (K > half - 1)
    p.bad("num_kv_pairs", fmt::format("{} distinct keys do not fit in the {} key tokens [1, {}) of vocab {}", K,
                                      half - 1, half, c.vocab));
  if (M > c.vocab - half)
    p.bad("vocab", fmt::format("num_kv_pairs*assignments = {} distinct values do not fit in the {} value tokens "
                               "[{}, {})", M, c.vocab - half, half, c.vocab));
  return c;
}

}  // namespace

void register_mqrar(TaskRegistry& registry) {
  registry.add({"mqrar",
                "multi-query repeated associative recall, N-back (MQRAR-N of the PaTH paper)",
                {{"vocab", "8192", "vocabulary size V (>= 4): 0 filler, keys [1, V/2), values [V/2, V)"},
                 {"length", "768", "tokens per sequence L (even, >= 2*num_kv_pairs*(assignments+1))"},
                 {"num_kv_pairs", "32", "K distinct keys; each is queried once"},
                 {"n_back", "1", "N >= 1: a query asks for the N-th most recent value of its key"},
                 {"layout", "varied",
                  "varied: each key assigned a uniform number of times in [n_back, assignments], so the answer's "
                  "position among them varies; fixed: every key exactly `assignments` times"},
                 {"assignments", "",
                  "A: varied: the most assignments of a key, > n_back (default n_back+3); fixed: every key's, "
                  ">= n_back (default n_back+1)"},
                 {"power_a", "0.01", "query gap law P(g) proportional to (g+1)^(a-1), a > 0; 1 = uniform"},
                 {"random_non_queries", "false", "replace filler zeros by uniform tokens of [0, V)"},
                 {"query_order", "zoology",
                  "zoology: i-th drawn gap queries the i-th key by first appearance; shuffled: random"}},
                [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<Mqrar>(read_mqrar_config(p)); },
                "built-in", "length"});
}

}  // namespace sb
