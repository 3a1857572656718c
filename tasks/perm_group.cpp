// perm_group.cpp: building permutation groups (S_n, A_n, Z_n, direct products, generator closure
// from YAML) and their multiplication tables. See perm_group.hpp for the composition convention
// and the element orderings.
#include "tasks/perm_group.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/error.hpp"

namespace sb {
namespace {

using Perm = std::vector<uint8_t>;

std::string as_key(const uint8_t* perm, int n) { return std::string(reinterpret_cast<const char*>(perm), n); }

// (a*b)[i] = b[a[i]]: apply a first, then b.
Perm compose(const uint8_t* a, const uint8_t* b, int n) {
  Perm c(n);
  for (int i = 0; i < n; ++i) c[i] = b[a[i]];
  return c;
}

Perm identity_perm(int n) {
  Perm p(n);
  std::iota(p.begin(), p.end(), uint8_t{0});
  return p;
}

// The cycle (c_0 c_1 ... c_m) on n points: c_j -> c_{j+1}, c_m -> c_0.
Perm cycle_perm(int n, const std::vector<int>& cycle) {
  Perm p = identity_perm(n);
  for (size_t j = 0; j < cycle.size(); ++j) p[cycle[j]] = static_cast<uint8_t>(cycle[(j + 1) % cycle.size()]);
  return p;
}

std::vector<int> range(int from, int to) {
  std::vector<int> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

bool perm_is_even(const uint8_t* p, int n) {
  std::vector<bool> seen(n, false);
  int cycles = 0;
  for (int i = 0; i < n; ++i) {
    if (seen[i]) continue;
    ++cycles;
    for (int j = i; !seen[j]; j = p[j]) seen[j] = true;
  }
  return (n - cycles) % 2 == 0;
}

std::string format_perm(const uint8_t* p, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", static_cast<int>(p[i]));
  return s + "]";
}

// Rejects groups over the caps before any element is enumerated.
void check_size(const std::string& spec, int64_t order, int64_t points) {
  if (order > PermGroup::kMaxOrder)
    fail("group '{}' is too large: {} elements, the cap is {} (= |S7|)", spec,
         order > 1000000000 ? std::string("more than 10^9") : std::to_string(order), PermGroup::kMaxOrder);
  if (points > PermGroup::kMaxPoints)
    fail("group '{}' is too large: it acts on {} points, the cap is {}", spec, points, PermGroup::kMaxPoints);
}

int64_t factorial_capped(int n) {  // n! for n <= 12, else a value above every cap
  if (n > 12) return int64_t{1} << 40;
  int64_t f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

// One factor of a spec string: letter S, A or Z and n >= 1.
struct Factor {
  char kind;
  int n;
  int64_t order, points;
};

Factor parse_factor(const std::string& spec, const std::string& text) {
  const char* expected = "expected S<n>, A<n>, Z<n> (n >= 1), products joined by 'x' such as A4xZ5, or a .yaml file";
  if (text.size() < 2 || (text[0] != 'S' && text[0] != 'A' && text[0] != 'Z') ||
      !std::all_of(text.begin() + 1, text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    fail("bad group spec '{}': factor '{}' is not understood ({})", spec, text, expected);
  if (text.size() > 10) check_size(text, int64_t{1} << 40, int64_t{1} << 40);
  const int n = std::stoi(text.substr(1));
  if (n < 1) fail("bad group spec '{}': factor '{}' needs n >= 1", spec, text);
  Factor f{text[0], n, 0, n};
  if (f.kind == 'S') f.order = factorial_capped(n);
  if (f.kind == 'A') f.order = n < 2 ? 1 : factorial_capped(n) / 2;
  if (f.kind == 'Z') f.order = n;
  check_size(text, f.order, f.points);
  return f;
}

bool names_a_file(const std::string& spec) {
  auto ends_with = [&](const std::string& suffix) {
    return spec.size() >= suffix.size() && spec.compare(spec.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml") || spec.find('/') != std::string::npos;
}

void check_generator_name(const std::string& source, const std::string& name, size_t index) {
  const bool bad = name.empty() || name[0] == '(' || name[0] == '<' || name == "e" ||
                   name.find(',') != std::string::npos ||
                   std::any_of(name.begin(), name.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; });
  if (bad)
    fail("{}: generator name '{}' (#{}) is not allowed (non-empty, no spaces or ',', not 'e', not starting "
         "with '(' or '<')", source, name, index);
}

}  // namespace

std::string PermGroup::cycle_notation(const uint8_t* perm, int n) {
  std::string s;
  std::vector<bool> seen(n, false);
  for (int i = 0; i < n; ++i) {
    if (seen[i] || perm[i] == i) continue;
    s += "(";
    for (int j = i; !seen[j]; j = perm[j]) {
      seen[j] = true;
      s += fmt::format("{}{}", j == i ? "" : " ", j);
    }
    s += ")";
  }
  return s.empty() ? "e" : s;
}

std::vector<int> PermGroup::permutation(int32_t a) const {
  const uint8_t* p = perm(a);
  return std::vector<int>(p, p + points_);
}

int32_t PermGroup::find(const std::vector<int>& perm) const {
  if (static_cast<int>(perm.size()) != points_) return -1;
  Perm p(points_);
  for (int i = 0; i < points_; ++i) {
    if (perm[i] < 0 || perm[i] >= points_) return -1;
    p[i] = static_cast<uint8_t>(perm[i]);
  }
  const auto it = index_.find(as_key(p.data(), points_));
  return it == index_.end() ? -1 : it->second;
}

bool PermGroup::is_even(int32_t a) const { return perm_is_even(perm(a), points_); }

bool PermGroup::is_abelian() const {
  for (int32_t a = 0; a < order_; ++a)
    for (int32_t b = a + 1; b < order_; ++b)
      if (mul(a, b) != mul(b, a)) return false;
  return true;
}

void PermGroup::finish(const std::vector<Perm>& generator_perms) {
  const int n = points_;
  order_ = static_cast<int32_t>(perms_.size() / n);
  const Perm e = identity_perm(n);
  if (perms_.size() < static_cast<size_t>(n) || !std::equal(e.begin(), e.end(), perms_.begin()))
    fail("group '{}': internal error, element 0 is not the identity", spec_);
  index_.clear();
  index_.reserve(order_);
  for (int32_t a = 0; a < order_; ++a)
    if (!index_.emplace(as_key(perm(a), n), a).second)
      fail("group '{}': internal error, duplicate element {}", spec_, a);
  if (static_cast<int32_t>(names_.size()) != order_ || names_[0] != "e")
    fail("group '{}': internal error, element names do not match the elements", spec_);
  {
    std::vector<std::string> sorted = names_;
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end()) fail("group '{}': two elements share the name '{}'", spec_, *dup);
  }

  // right[x * G + g] = id of x * generator g.
  const size_t G = generator_perms.size();
  std::vector<int32_t> right(static_cast<size_t>(order_) * G);
  for (int32_t x = 0; x < order_; ++x)
    for (size_t g = 0; g < G; ++g) {
      const auto it = index_.find(as_key(compose(perm(x), generator_perms[g].data(), n).data(), n));
      if (it == index_.end()) fail("group '{}': internal error, the generators leave the element set", spec_);
      right[x * G + g] = it->second;
    }
  generators_.clear();
  for (const auto& g : generator_perms) generators_.push_back(index_.at(as_key(g.data(), n)));
  if (generators_.empty()) generators_.push_back(0);

  // BFS tree from the identity: every b is parent[b] * generator via[b], parent first in `bfs`.
  std::vector<int32_t> parent(order_, -1), via(order_, -1), bfs{0};
  parent[0] = 0;
  for (size_t q = 0; q < bfs.size(); ++q)
    for (size_t g = 0; g < G; ++g) {
      const int32_t c = right[bfs[q] * G + g];
      if (parent[c] < 0) {
        parent[c] = bfs[q];
        via[c] = static_cast<int32_t>(g);
        bfs.push_back(c);
      }
    }
  if (static_cast<int32_t>(bfs.size()) != order_)
    fail("group '{}': internal error, the generators reach {} of {} elements", spec_, bfs.size(), order_);

  // a * b = (a * parent[b]) * via[b], filled in BFS order so a * parent[b] is already known.
  table_.assign(static_cast<size_t>(order_) * order_, 0);
  for (int32_t a = 0; a < order_; ++a) {
    uint16_t* row = &table_[static_cast<size_t>(a) * order_];
    row[0] = static_cast<uint16_t>(a);
    for (size_t q = 1; q < bfs.size(); ++q) {
      const int32_t b = bfs[q];
      row[b] = static_cast<uint16_t>(right[row[parent[b]] * G + via[b]]);
    }
  }

  inverse_.assign(order_, 0);
  element_order_.assign(order_, 1);
  for (int32_t a = 0; a < order_; ++a) {
    Perm inv(n);
    for (int i = 0; i < n; ++i) inv[perm(a)[i]] = static_cast<uint8_t>(i);
    inverse_[a] = index_.at(as_key(inv.data(), n));
    for (int32_t x = a; x != 0; x = mul(x, a)) ++element_order_[a];  // a^k for k = 1, 2, ...
  }
}

PermGroup PermGroup::symmetric(int n) {
  const std::string spec = fmt::format("S{}", n);
  if (n < 1) fail("bad group spec '{}': n must be >= 1", spec);
  check_size(spec, factorial_capped(n), n);
  PermGroup g;
  g.spec_ = spec;
  g.points_ = n;
  Perm p = identity_perm(n);
  do {
    g.perms_.insert(g.perms_.end(), p.begin(), p.end());
    g.names_.push_back(cycle_notation(p.data(), n));
  } while (std::next_permutation(p.begin(), p.end()));
  std::vector<Perm> gens;
  if (n >= 2) gens.push_back(cycle_perm(n, {0, 1}));
  if (n >= 3) gens.push_back(cycle_perm(n, range(0, n)));
  g.finish(gens);
  return g;
}

PermGroup PermGroup::alternating(int n) {
  const std::string spec = fmt::format("A{}", n);
  if (n < 1) fail("bad group spec '{}': n must be >= 1", spec);
  check_size(spec, n < 2 ? 1 : factorial_capped(n) / 2, n);
  PermGroup g;
  g.spec_ = spec;
  g.points_ = n;
  Perm p = identity_perm(n);
  do {
    if (!perm_is_even(p.data(), n)) continue;
    g.perms_.insert(g.perms_.end(), p.begin(), p.end());
    g.names_.push_back(cycle_notation(p.data(), n));
  } while (std::next_permutation(p.begin(), p.end()));
  // (0 1 2) with (0 1 ... n-1) for odd n, or with (1 2 ... n-1) for even n, generate A_n (n >= 3).
  std::vector<Perm> gens;
  if (n >= 3) gens.push_back(cycle_perm(n, {0, 1, 2}));
  if (n >= 4) gens.push_back(cycle_perm(n, n % 2 == 1 ? range(0, n) : range(1, n)));
  g.finish(gens);
  return g;
}

PermGroup PermGroup::cyclic(int n) {
  const std::string spec = fmt::format("Z{}", n);
  if (n < 1) fail("bad group spec '{}': n must be >= 1", spec);
  check_size(spec, n, n);
  PermGroup g;
  g.spec_ = spec;
  g.points_ = n;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < n; ++i) g.perms_.push_back(static_cast<uint8_t>((i + k) % n));
    g.names_.push_back(k == 0 ? "e" : fmt::format("r{}", k));
  }
  std::vector<Perm> gens;
  if (n >= 2) gens.push_back(cycle_perm(n, range(0, n)));
  g.finish(gens);
  return g;
}

PermGroup PermGroup::product(const std::vector<PermGroup>& factors) {
  if (factors.empty()) fail("a direct product needs at least one factor");
  if (factors.size() == 1) return factors[0];
  std::string spec;
  int64_t order = 1, points = 0;
  for (const auto& f : factors) {
    spec += (spec.empty() ? "" : "x") + f.spec_;
    order = std::min<int64_t>(order * f.order_, int64_t{1} << 40);
    points += f.points_;
  }
  check_size(spec, order, points);
  PermGroup g;
  g.spec_ = spec;
  g.points_ = static_cast<int32_t>(points);
  std::vector<int32_t> digit(factors.size(), 0);
  for (int64_t id = 0; id < order; ++id) {
    int64_t rest = id;
    for (size_t j = factors.size(); j-- > 0;) {
      digit[j] = static_cast<int32_t>(rest % factors[j].order_);
      rest /= factors[j].order_;
    }
    std::string name;
    bool identity = true;
    int offset = 0;
    for (size_t j = 0; j < factors.size(); ++j) {
      const uint8_t* p = factors[j].perm(digit[j]);
      for (int i = 0; i < factors[j].points_; ++i) g.perms_.push_back(static_cast<uint8_t>(p[i] + offset));
      offset += factors[j].points_;
      if (j) name += ',';
      name += factors[j].name(digit[j]);
      identity = identity && digit[j] == 0;
    }
    g.names_.push_back(identity ? "e" : name);
  }
  std::vector<Perm> gens;
  int offset = 0;
  for (const auto& f : factors) {
    for (int32_t gen : f.generators_) {
      if (gen == 0) continue;
      Perm p = identity_perm(g.points_);
      for (int i = 0; i < f.points_; ++i) p[offset + i] = static_cast<uint8_t>(f.perm(gen)[i] + offset);
      gens.push_back(p);
    }
    offset += f.points_;
  }
  g.finish(gens);
  return g;
}

PermGroup PermGroup::from_generators(const std::vector<std::vector<int>>& generators,
                                     const std::vector<std::string>& generator_names, const std::string& source) {
  if (generators.empty()) fail("{}: no generators given", source);
  const size_t n = generators[0].size();
  if (n == 0) fail("{}: generator 0 is empty", source);
  if (n > static_cast<size_t>(kMaxPoints))
    fail("{}: generators act on {} points, the cap is {}", source, n, kMaxPoints);
  if (!generator_names.empty() && generator_names.size() != generators.size())
    fail("{}: {} names for {} generators", source, generator_names.size(), generators.size());
  std::vector<Perm> gens;
  for (size_t k = 0; k < generators.size(); ++k) {
    const auto& gen = generators[k];
    std::string shown = "[";
    for (size_t i = 0; i < gen.size(); ++i) shown += fmt::format("{}{}", i ? ", " : "", gen[i]);
    shown += "]";
    if (gen.size() != n)
      fail("{}: generator {} {} has {} entries, generator 0 has {}", source, k, shown, gen.size(), n);
    std::vector<bool> hit(n, false);
    for (int v : gen) {
      if (v < 0 || v >= static_cast<int>(n))
        fail("{}: generator {} {} is not a permutation: value {} is outside 0..{}", source, k, shown, v, n - 1);
      if (hit[v]) fail("{}: generator {} {} is not a permutation: {} appears twice", source, k, shown, v);
      hit[v] = true;
    }
    gens.emplace_back(gen.begin(), gen.end());
    for (size_t j = 0; j < k; ++j)
      if (gens[j] == gens[k]) fail("{}: generator {} {} repeats generator {}", source, k, shown, j);
  }

  PermGroup g;
  g.spec_ = source;
  g.points_ = static_cast<int32_t>(n);
  std::unordered_map<std::string, int32_t> seen;
  auto add = [&](const Perm& p) {
    if (static_cast<int32_t>(seen.size()) >= kMaxOrder)
      fail("{}: the generators give a group of more than {} elements, the cap (= |S7|)", source, kMaxOrder);
    seen.emplace(as_key(p.data(), static_cast<int>(n)), static_cast<int32_t>(seen.size()));
    g.perms_.insert(g.perms_.end(), p.begin(), p.end());
  };
  add(identity_perm(static_cast<int>(n)));
  for (size_t q = 0; q < seen.size(); ++q)
    for (const auto& gen : gens) {
      const Perm c = compose(&g.perms_[q * n], gen.data(), static_cast<int>(n));
      if (!seen.count(as_key(c.data(), static_cast<int>(n)))) add(c);
    }
  for (size_t a = 0; a < seen.size(); ++a) g.names_.push_back(cycle_notation(&g.perms_[a * n], static_cast<int>(n)));
  for (size_t k = 0; k < generator_names.size(); ++k) {
    const int32_t id = seen.at(as_key(gens[k].data(), static_cast<int>(n)));
    if (id == 0) {
      if (generator_names[k] != "e")
        fail("{}: generator {} is the identity, which is always named 'e' (not '{}')", source, k, generator_names[k]);
      continue;
    }
    check_generator_name(source, generator_names[k], k);
    for (size_t j = 0; j < k; ++j)
      if (generator_names[j] == generator_names[k])
        fail("{}: generators {} and {} share the name '{}'", source, j, k, generator_names[k]);
    g.names_[id] = generator_names[k];
  }
  g.finish(gens);
  // finish() turned an all-identity generating set into {0}; keep every listed generator instead.
  g.generators_.clear();
  for (const auto& gen : gens) g.generators_.push_back(seen.at(as_key(gen.data(), static_cast<int>(n))));
  return g;
}

PermGroup PermGroup::from_yaml_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail("group file '{}' not found", path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail("group file '{}': bad YAML: {}", path, e.what());
  }
  if (!root.IsMap()) fail("group file '{}': expected a mapping with keys points, generators, names", path);
  const std::string source = "group file '" + path + "'";
  int points = -1;
  std::vector<std::vector<int>> generators;
  std::vector<std::string> names;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key != "points" && key != "generators" && key != "names")
        fail("{}: unknown key '{}' (known: points, generators, names)", source, key);
    }
    if (root["points"]) {
      points = root["points"].as<int>();
      if (points < 1 || points > kMaxPoints) fail("{}: points: {} must be in [1, {}]", source, points, kMaxPoints);
    }
    const YAML::Node gens = root["generators"];
    if (!gens || !gens.IsSequence() || gens.size() == 0)
      fail("{}: 'generators' must be a non-empty list of permutations", source);
    for (size_t k = 0; k < gens.size(); ++k) {
      if (!gens[k].IsSequence()) fail("{}: generator {} is not a list of integers", source, k);
      std::vector<int> gen;
      for (const auto& v : gens[k]) gen.push_back(v.as<int>());
      if (points >= 0 && static_cast<int>(gen.size()) != points)
        fail("{}: generator {} has {} entries, but points is {}", source, k, gen.size(), points);
      generators.push_back(std::move(gen));
    }
    if (root["names"]) {
      if (!root["names"].IsSequence()) fail("{}: 'names' must be a list of strings", source);
      for (const auto& v : root["names"]) names.push_back(v.as<std::string>());
    }
  } catch (const YAML::Exception& e) {
    fail("{}: {}", source, e.what());
  }
  PermGroup g = from_generators(generators, names, source);
  g.spec_ = path;
  return g;
}

PermGroup PermGroup::parse(const std::string& spec) {
  if (spec.empty())
    fail("empty group spec (expected S<n>, A<n>, Z<n>, products joined by 'x' such as A4xZ5, or a .yaml file)");
  if (names_a_file(spec)) return from_yaml_file(spec);
  std::vector<Factor> factors;
  size_t start = 0;
  while (true) {
    const size_t end = spec.find('x', start);
    factors.push_back(parse_factor(spec, spec.substr(start, end == std::string::npos ? end : end - start)));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  int64_t order = 1, points = 0;
  for (const auto& f : factors) {
    order = std::min<int64_t>(order * f.order, int64_t{1} << 40);
    points += f.points;
  }
  check_size(spec, order, points);
  std::vector<PermGroup> groups;
  for (const auto& f : factors)
    groups.push_back(f.kind == 'S' ? symmetric(f.n) : f.kind == 'A' ? alternating(f.n) : cyclic(f.n));
  return product(groups);
}

std::string PermGroup::describe() const {
  std::string gens;
  for (int32_t g : generators_) gens += (gens.empty() ? "" : "  ") + names_[g];
  size_t width = 4;
  for (const auto& s : names_) width = std::max(width, s.size());
  std::string out = fmt::format(
      "composition: {}\n"
      "group {}: order {}, acting on {} points, {}\n"
      "generators (inputs=generators): {}\n"
      "elements (id = token id):\n{:>5}  {:<{}}  {:<{}}  {:>5}  {}\n",
      kCompositionConvention, spec_, order_, points_, is_abelian() ? "abelian" : "non-abelian", gens, "id",
      "name", width, "permutation", std::max<size_t>(11, 3 * points_), "order", "parity");
  for (int32_t a = 0; a < order_; ++a)
    out += fmt::format("{:>5}  {:<{}}  {:<{}}  {:>5}  {}\n", a, names_[a], width, format_perm(perm(a), points_),
                       std::max<size_t>(11, 3 * points_), element_order_[a], is_even(a) ? "even" : "odd");
  return out;
}

}  // namespace sb
