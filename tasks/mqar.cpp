// mqar.cpp: multi-query associative recall with Zoology's semantics (Arora et al. 2024; reference
// generator HazyResearch/zoology, zoology/data/associative_recall.py::_mqar / multiquery_ar.py).
// Correspondence, Zoology -> here (V = vocab, K = num_kv_pairs, L = length, a = power_a):
//  - keys: choice(arange(1, V//2), K, replace=False): K distinct keys from [1, V/2), random order;
//    values: choice(arange(V//2, V), K, replace=False): K distinct values from [V/2, V).
//  - context: kvs[0::2] = keys, kvs[1::2] = values -> tokens 0..2K-1 are k1 v1 k2 v2 ... kK vK.
//  - space = (L - 2K)//2 two-token query slots; p = a * arange(1, space+1)**(a-1), normalised, i.e.
//    P(g) proportional to (g+1)^(a-1) for slot g in [0, space); gaps = choice(space, K,
//    replace=False, p=p), equal in distribution to sequential weighted draws (drawn here exactly
//    with Efraimidis-Spirakis exponential keys, recall_sampling.cpp).
//  - put_along_axis(queries, 2*gaps, keys): the i-th drawn gap holds the i-th context key at input
//    position 2K + 2*gap_i; labels[2*gaps + 2K + 1] = values and the shift inputs = ex[:-1],
//    labels = lab[1:] put value_i as the label AT the query key's position (the next-token
//    target); the token after a query key is 0, never the value. Every key is queried once.
//  - L must be even (Zoology asserts it); the query array's extra trailing token is cut by [:-1],
//    so the sequence has exactly L tokens and the last is the filler of the last slot.
//  - random_non_queries: inputs[inputs == 0] = randint(V): each filler 0 becomes uniform in [0, V)
//    (possibly 0, a key or a value). Zoology defaults it to True; the paper grid and this task
//    default to false.
//  - Zoology also asserts V > L and 4K <= L; only the second matters here (K query slots).
// Beyond Zoology: query_order=shuffled assigns the keys to the drawn gaps in a uniformly random
// order (Zoology's i-th-gap-to-i-th-key rule makes early context keys tend to be queried first).
#include "core/error.hpp"
#include "tasks/recall_sampling.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

struct MqarConfig {
  int32_t vocab;
  int64_t length;
  int32_t num_kv_pairs;
  double power_a;
  bool random_non_queries;
  recall::QueryOrder order;
  std::string order_name;
};

class Mqar final : public Task {
 public:
  explicit Mqar(MqarConfig c)
      : c_(std::move(c)), gaps_((c_.length - 2 * int64_t{c_.num_kv_pairs}) / 2, c_.power_a) {}

  std::string name() const override { return "mqar"; }
  int64_t seq_len() const override { return c_.length; }
  std::vector<std::string> vocab() const override { return recall::recall_vocab(c_.vocab); }
  std::string details() const override {
    const int32_t K = c_.num_kv_pairs, half = c_.vocab / 2;
    return fmt::format(
        "vocabulary: {} tokens: 0 = filler '_', keys k1..k{} = [1, {}), values v{}..v{} = [{}, {})\n"
        "context: positions 0..{}: k_1 v_1 ... k_K v_K with K={} distinct keys and K distinct values "
        "(uniformly random, random order)\n"
        "query region: positions {}..{}: {} two-token slots (key, filler 0); slot g of a query draw has "
        "P(g) proportional to (g+1)^(a-1), a={:g}; K gaps drawn without replacement (sequentially weighted, "
        "= numpy choice(replace=False, p))\n"
        "query order: {} ({})\n"
        "labels: at the input position of each queried key, the value paired with it in the context; "
        "-100 elsewhere; score mask = the K query positions\n"
        "random_non_queries={}: {}\n"
        "reference: Zoology (Arora et al. 2024) zoology/data/associative_recall.py _mqar: same vocabulary "
        "split, layout, gap law, label placement (after its inputs=ex[:-1], labels=lab[1:] shift) and filler",
        c_.vocab, half - 1, half, half, c_.vocab - 1, half, c_.vocab, 2 * K - 1, K, 2 * K, c_.length - 1,
        gaps_.space(), c_.power_a, c_.order_name,
        c_.order == recall::QueryOrder::kZoology ? "the i-th drawn gap queries the i-th context key, as Zoology"
                                                 : "keys assigned to the drawn gaps in a uniformly random order",
        c_.random_non_queries,
        c_.random_non_queries ? "every filler 0 replaced by a uniform token of [0, V) (as Zoology's randint)"
                              : "filler positions stay 0");
  }

  void sample(int split, Rng& rng, ExampleView out) const override {
    const int32_t K = c_.num_kv_pairs, half = c_.vocab / 2;
    thread_local std::vector<int32_t> keys, values;
    keys.resize(static_cast<size_t>(K));
    values.resize(static_cast<size_t>(K));
    recall::sample_distinct(rng, 1, half - 1, K, keys.data());
    recall::sample_distinct(rng, half, c_.vocab - half, K, values.data());
    for (int32_t i = 0; i < K; ++i) {
      out.input_ids[2 * i] = keys[static_cast<size_t>(i)];
      out.input_ids[2 * i + 1] = values[static_cast<size_t>(i)];
    }
    recall::write_queries(rng, gaps_, c_.order, keys.data(), values.data(), K, 2 * int64_t{K}, c_.length, out);
    if (c_.random_non_queries) recall::fill_zeros_with_random_tokens(rng, c_.vocab, out.input_ids, c_.length);
  }

 private:
  MqarConfig c_;
  recall::PowerLawGaps gaps_;
};

MqarConfig read_mqar_config(const Params& p) {
  MqarConfig c;
  c.vocab = static_cast<int32_t>(p.integer("vocab", 4, int64_t{1} << 30));
  c.length = p.integer("length", 4, int64_t{1} << 30);
  c.num_kv_pairs = static_cast<int32_t>(p.integer("num_kv_pairs", 1, int64_t{1} << 30));
  c.power_a = p.real("power_a");
  c.random_non_queries = p.flag("random_non_queries");
  c.order_name = p.choice("query_order", {"zoology", "shuffled"});
  c.order = recall::parse_query_order(c.order_name);
  const int64_t K = c.num_kv_pairs, L = c.length;
  if (!(c.power_a > 0)) p.bad("power_a", "must be > 0 (P(g) proportional to (g+1)^(a-1); 1 = uniform)");
  if (L % 2 != 0) p.bad("length", "must be even (two-token query slots; Zoology asserts input_seq_len % 2 == 0)");
  if (2 * K > L)
    p.bad("num_kv_pairs", fmt::format("the context of 2*num_kv_pairs = {} tokens exceeds length {}", 2 * K, L));
  if ((L - 2 * K) / 2 < K)
    p.bad("length", fmt::format("only {} query slots after a {}-token context; {} queries (num_kv_pairs) need "
                                "length >= 4*num_kv_pairs = {}", (L - 2 * K) / 2, 2 * K, K, 4 * K));
  const int64_t half = c.vocab / 2;
  if (K > half - 1)
    p.bad("num_kv_pairs", fmt::format("{} distinct keys do not fit in the {} key tokens [1, {}) of vocab {}", K,
                                      half - 1, half, c.vocab));
  // The value range [V/2, V) always holds more tokens than the key range, so keys bind first.
  return c;
}

}  // namespace

void register_mqar(TaskRegistry& registry) {
  registry.add({"mqar",
                "multi-query associative recall, Zoology's generator (Arora et al. 2024)",
                {{"vocab", "8192", "vocabulary size V (>= 4): 0 filler, keys [1, V/2), values [V/2, V)"},
                 {"length", "256", "tokens per sequence L (even, >= 4*num_kv_pairs)"},
                 {"num_kv_pairs", "16", "K key-value pairs in the context; each key is queried once"},
                 {"power_a", "0.01", "query gap law P(g) proportional to (g+1)^(a-1), a > 0; 1 = uniform"},
                 {"random_non_queries", "false", "replace filler zeros by uniform tokens of [0, V) (Zoology's option)"},
                 {"query_order", "zoology",
                  "zoology: i-th drawn gap queries the i-th context key; shuffled: uniformly random assignment"}},
                [](const Params& p) -> std::unique_ptr<Task> { return std::make_unique<Mqar>(read_mqar_config(p)); },
                "built-in", "length"});
}

}  // namespace sb
