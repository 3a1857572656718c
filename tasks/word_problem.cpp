// word_problem.cpp: group word problems (Merrill, Petty, Sabharwal 2024, "The Illusion of State in
// State-Space Models"). Inputs x_1..x_k are group elements; the label at position t is the prefix
// product p_t = x_1*x_2*...*x_t (apply x_1 first; see perm_group.hpp), or only p_k with
// labels=final. One token per element (id = element id), then "<bos>" when bos=true.
#include "core/error.hpp"
#include "tasks/perm_group.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

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
        inputs += fmt::format("{}{}", i ? ", " : "", group_.name(group_.generators()[i]));
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
    uint32_t state = 0;  // p_0 = e
    if (generators_only_) {
      const std::vector<int32_t>& gens = group_.generators();
      const uint32_t count = static_cast<uint32_t>(gens.size());
      for (int64_t t = 0; t < length_; ++t) {
        const uint32_t x = static_cast<uint32_t>(gens[rng.below(count)]);
        state = table[state * G + x];
        in[t] = static_cast<int32_t>(x);
        labels[t] = static_cast<int32_t>(state);
      }
    } else {
      for (int64_t t = 0; t < length_; ++t) {
        const uint32_t x = rng.below(G);
        state = table[state * G + x];
        in[t] = static_cast<int32_t>(x);
        labels[t] = static_cast<int32_t>(state);
      }
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
                  return std::make_unique<WordProblem>(std::move(group), length, final_only, bos, generators_only);
                }});
}

}  // namespace sb
