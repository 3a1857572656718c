// perm_group.hpp: finite permutation groups with every element enumerated, a full |G| x |G|
// multiplication table, inverses, names and the underlying permutation arrays. Built from a spec
// string (S<n>, A<n>, Z<n>, products joined by 'x' such as A4xZ5) or from a YAML file of generators.
// Used by the word_problem task (tasks/word_problem.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sb {

// COMPOSITION CONVENTION (project-wide). An element is an array s over points 0..n-1 with
// s[i] = the image of point i ("one-line" notation). The product a*b means "apply a first, then
// b": (a*b)[i] = b[a[i]]. A word x_1 x_2 ... x_t therefore evaluates to the state reached by
// applying the moves left to right, p_t = x_1 * x_2 * ... * x_t = p_{t-1} * x_t.
inline constexpr const char* kCompositionConvention =
    "element = permutation s of points 0..n-1 with s[i] = image of point i; "
    "a*b = apply a first, then b: (a*b)[i] = b[a[i]]; "
    "prefix product p_t = x_1*x_2*...*x_t = p_(t-1)*x_t (moves applied left to right)";

class PermGroup {
 public:
  static constexpr int32_t kMaxOrder = 5040;  // |S7|
  static constexpr int32_t kMaxPoints = 64;

  // A spec string: S<n>, A<n>, Z<n>, or a direct product of those joined by 'x' ("A4xZ5",
  // "Z2xZ2xZ3"); or a YAML file path (when the spec ends in .yaml/.yml or contains '/').
  // Throws sb::Error naming the spec or file on anything malformed or too large.
  static PermGroup parse(const std::string& spec);

  // S_n: all permutations of n points, element ids in lexicographic order of the image arrays.
  // Generators: the transposition (0 1) and the n-cycle (0 1 ... n-1).
  static PermGroup symmetric(int n);
  // A_n: the even permutations in lexicographic order. Generators: the 3-cycle (0 1 2) and the
  // cycle (0 1 ... n-1) for odd n or (1 2 ... n-1) for even n.
  static PermGroup alternating(int n);
  // Z_n: rotations of n points; element k is i -> (i + k) mod n, named "r<k>". Generator: r1.
  static PermGroup cyclic(int n);
  // Direct product G_1 x ... x G_m acting on the disjoint union of the factors' points (factor j's
  // points shifted past those of factors 0..j-1). Element (a_1, ..., a_m) has mixed-radix id
  // ((a_1*|G_2| + a_2)*|G_3| + a_3)..., so for two factors (a, b) -> a*|H| + b. Name: the factor
  // names joined by ',' (e.g. "(0 1 2),r3"); the identity is "e". Generators: each factor's
  // generators embedded (other coordinates the identity).
  static PermGroup product(const std::vector<PermGroup>& factors);
  // The closure of `generators` (each a permutation of 0..n-1 in one-line notation), element ids in
  // BFS discovery order from the identity, right-multiplying by the generators in listed order.
  // `generator_names` (empty or one per generator) name the generator elements; every other
  // element is named by its cycle notation. `source` names the origin in error messages.
  static PermGroup from_generators(const std::vector<std::vector<int>>& generators,
                                   const std::vector<std::string>& generator_names,
                                   const std::string& source);
  // YAML schema: {points: n (optional), generators: [[...], ...], names: [...] (optional)}.
  static PermGroup from_yaml_file(const std::string& path);

  const std::string& spec() const { return spec_; }
  int32_t order() const { return order_; }
  int32_t points() const { return points_; }

  int32_t mul(int32_t a, int32_t b) const { return table_[static_cast<size_t>(a) * order_ + b]; }
  const uint16_t* table() const { return table_.data(); }  // [order, order], row a, column b = a*b
  int32_t inverse(int32_t a) const { return inverse_[a]; }
  const uint8_t* perm(int32_t a) const { return &perms_[static_cast<size_t>(a) * points_]; }  // [points]
  std::vector<int> permutation(int32_t a) const;  // perm(a) as a vector
  const std::string& name(int32_t a) const { return names_[a]; }
  const std::vector<std::string>& names() const { return names_; }
  // The generating set used by word_problem inputs=generators (element ids; never empty: the
  // trivial group's is {0}).
  const std::vector<int32_t>& generators() const { return generators_; }

  int32_t find(const std::vector<int>& perm) const;  // element id of a permutation, -1 if none
  int32_t element_order(int32_t a) const { return element_order_[a]; }
  bool is_even(int32_t a) const;
  bool is_abelian() const;

  // Human-readable description: convention, order, generators, element table
  // (id, name, permutation, order, parity).
  std::string describe() const;

  // Cycle notation of a permutation: "(0 1 2)(3 4)", the identity "e".
  static std::string cycle_notation(const uint8_t* perm, // [n]
                                    int n);

 private:
  PermGroup() = default;
  // Fills table, inverses and element orders from perms_ (identity first) and the generator
  // permutations, which must generate every listed element.
  void finish(const std::vector<std::vector<uint8_t>>& generator_perms);

  std::string spec_;
  int32_t order_ = 0, points_ = 0;
  std::vector<uint8_t> perms_;        // [order, points]
  std::vector<uint16_t> table_;       // [order, order]
  std::vector<int32_t> inverse_;      // [order]
  std::vector<int32_t> element_order_;  // [order]
  std::vector<std::string> names_;    // [order]
  std::vector<int32_t> generators_;
  std::unordered_map<std::string, int32_t> index_;  // permutation bytes -> element id
};

}  // namespace sb
