// test_perm_group.cpp: permutation groups (tasks/perm_group.hpp): orders, element orderings and
// names, the group axioms of the multiplication table, agreement of the table with explicit
// composition (a*b)[i] = b[a[i]], YAML generator closure, and every error path.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "statebench/rng.hpp"
#include "tasks/perm_group.hpp"

namespace {

using sb::PermGroup;

std::string source_path(const std::string& rel) { return std::string(SB_SOURCE_DIR) + "/" + rel; }

std::string write_tmp(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(SB_TEST_TMP);
  const std::string path = std::string(SB_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Explicit composition, independent of the table: apply a, then b.
std::vector<int> then(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = b[a[i]];
  return c;
}

void expect_error(const std::string& spec, const std::string& mention) {
  try {
    PermGroup::parse(spec);
    ADD_FAILURE() << "no error for spec '" << spec << "'";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos)
        << "message for '" << spec << "' does not mention '" << mention << "': " << e.what();
  }
}

TEST(PermGroup, Orders) {
  const std::vector<std::pair<std::string, int>> cases = {
      {"S1", 1}, {"S2", 2}, {"S3", 6}, {"S4", 24}, {"S5", 120}, {"S7", 5040}, {"A3", 3}, {"A4", 12},
      {"A5", 60}, {"A6", 360}, {"Z1", 1}, {"Z60", 60}, {"A4xZ5", 60}, {"S3xZ2", 12}, {"Z2xZ2xZ3", 12}};
  for (const auto& [spec, order] : cases) {
    const PermGroup g = PermGroup::parse(spec);
    EXPECT_EQ(g.order(), order) << spec;
    EXPECT_EQ(g.spec(), spec);
  }
  EXPECT_EQ(PermGroup::parse("A4xZ5").points(), 9);
}

// Identity, inverses, closure, associativity (all triples up to |G| = 60, sampled above), and the
// table entry equal to explicit composition of the permutation arrays.
void check_axioms(const PermGroup& g, int sampled_triples) {
  const int32_t n = g.order();
  std::set<std::vector<int>> distinct;
  for (int32_t a = 0; a < n; ++a) distinct.insert(g.permutation(a));
  ASSERT_EQ(static_cast<int32_t>(distinct.size()), n) << g.spec();
  ASSERT_EQ(g.permutation(0), then(g.permutation(0), g.permutation(0))) << "element 0 is not the identity";
  for (int32_t a = 0; a < n; ++a) {
    ASSERT_EQ(g.mul(0, a), a);
    ASSERT_EQ(g.mul(a, 0), a);
    ASSERT_EQ(g.mul(a, g.inverse(a)), 0);
    ASSERT_EQ(g.mul(g.inverse(a), a), 0);
    std::vector<bool> row(n, false), col(n, false);
    for (int32_t b = 0; b < n; ++b) {
      ASSERT_GE(g.mul(a, b), 0);
      ASSERT_LT(g.mul(a, b), n);
      row[g.mul(a, b)] = true;
      col[g.mul(b, a)] = true;
    }
    ASSERT_TRUE(std::all_of(row.begin(), row.end(), [](bool x) { return x; })) << "row " << a << " not a bijection";
    ASSERT_TRUE(std::all_of(col.begin(), col.end(), [](bool x) { return x; })) << "col " << a << " not a bijection";
  }
  sb::Rng rng(123, static_cast<uint64_t>(n));
  if (n <= 60) {
    for (int32_t a = 0; a < n; ++a)
      for (int32_t b = 0; b < n; ++b) {
        ASSERT_EQ(g.permutation(g.mul(a, b)), then(g.permutation(a), g.permutation(b))) << g.spec();
        for (int32_t c = 0; c < n; ++c) ASSERT_EQ(g.mul(g.mul(a, b), c), g.mul(a, g.mul(b, c)));
      }
  } else {
    for (int i = 0; i < sampled_triples; ++i) {
      const int32_t a = rng.below(n), b = rng.below(n), c = rng.below(n);
      ASSERT_EQ(g.permutation(g.mul(a, b)), then(g.permutation(a), g.permutation(b))) << g.spec();
      ASSERT_EQ(g.mul(g.mul(a, b), c), g.mul(a, g.mul(b, c)));
    }
  }
}

TEST(PermGroup, GroupAxioms) {
  for (const char* spec : {"S3", "S4", "A4", "A5", "Z60", "A4xZ5", "S3xZ2", "Z2xZ2xZ3", "S5", "S7"})
    check_axioms(PermGroup::parse(spec), 20000);
  check_axioms(PermGroup::parse(source_path("experiments/groups/d4.yaml")), 0);
}

TEST(PermGroup, CompositionConvention) {
  // (0 1) then (0 1 2): 0->1->2, 1->0->1, 2->2->0, i.e. [2, 1, 0] = (0 2); the other order is (1 2).
  const PermGroup s3 = PermGroup::parse("S3");
  auto id = [&](const std::string& name) {
    const auto& names = s3.names();
    return static_cast<int32_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  EXPECT_EQ(s3.names(), (std::vector<std::string>{"e", "(1 2)", "(0 1)", "(0 1 2)", "(0 2 1)", "(0 2)"}));
  EXPECT_EQ(s3.name(s3.mul(id("(0 1)"), id("(0 1 2)"))), "(0 2)");
  EXPECT_EQ(s3.name(s3.mul(id("(0 1 2)"), id("(0 1)"))), "(1 2)");
  EXPECT_EQ(s3.permutation(id("(0 1 2)")), (std::vector<int>{1, 2, 0}));
}

TEST(PermGroup, OrderingsAndNames) {
  // S_n and A_n: lexicographic order of the image arrays; A_n keeps the even ones.
  const PermGroup s4 = PermGroup::parse("S4"), a4 = PermGroup::parse("A4");
  std::vector<int> p = {0, 1, 2, 3};
  int32_t i = 0, j = 0;
  do {
    EXPECT_EQ(s4.permutation(i++), p);
    int inversions = 0;
    for (int x = 0; x < 4; ++x)
      for (int y = x + 1; y < 4; ++y) inversions += p[x] > p[y];
    if (inversions % 2 == 0) {
      EXPECT_EQ(a4.permutation(j++), p);
    }
  } while (std::next_permutation(p.begin(), p.end()));
  EXPECT_EQ(j, 12);
  // Z_n: element k rotates by k.
  const PermGroup z5 = PermGroup::parse("Z5");
  for (int k = 0; k < 5; ++k)
    for (int x = 0; x < 5; ++x) EXPECT_EQ(z5.permutation(k)[x], (x + k) % 5);
  EXPECT_EQ(z5.name(0), "e");
  EXPECT_EQ(z5.name(3), "r3");
  // Products: (a, b) -> a * |H| + b on the disjoint union of points; names joined by ','.
  const PermGroup a4z5 = PermGroup::parse("A4xZ5");
  for (int32_t a = 0; a < 12; ++a)
    for (int32_t b = 0; b < 5; ++b) {
      std::vector<int> expected = a4.permutation(a);
      for (int x : z5.permutation(b)) expected.push_back(x + 4);
      EXPECT_EQ(a4z5.permutation(a * 5 + b), expected);
      EXPECT_EQ(a4z5.name(a * 5 + b), a + b == 0 ? "e" : a4.name(a) + "," + z5.name(b));
    }
  for (const char* spec : {"S5", "A4xZ5", "S3xZ2"}) {
    const PermGroup g = PermGroup::parse(spec);
    EXPECT_EQ(g.name(0), "e");
    EXPECT_EQ(std::set<std::string>(g.names().begin(), g.names().end()).size(), g.names().size()) << spec;
  }
  EXPECT_EQ(PermGroup::parse("S5").name(PermGroup::parse("S5").find({1, 2, 0, 4, 3})), "(0 1 2)(3 4)");
  EXPECT_EQ(PermGroup::parse("S3").find({0, 0, 1}), -1);
}

TEST(PermGroup, StructuralProperties) {
  const PermGroup a5 = PermGroup::parse("A5"), z60 = PermGroup::parse("Z60"), s5 = PermGroup::parse("S5");
  EXPECT_FALSE(a5.is_abelian());
  EXPECT_TRUE(z60.is_abelian());
  EXPECT_FALSE(PermGroup::parse("A4xZ5").is_abelian());
  EXPECT_TRUE(PermGroup::parse("Z2xZ2xZ3").is_abelian());
  for (int32_t a = 0; a < a5.order(); ++a) EXPECT_TRUE(a5.is_even(a));
  int even = 0;
  for (int32_t a = 0; a < s5.order(); ++a) even += s5.is_even(a);
  EXPECT_EQ(even, 60);
  // Element orders by explicit powers of the permutation; S5 has orders {1,2,3,4,5,6}, Z60 has 60.
  std::set<int> orders;
  for (int32_t a = 0; a < s5.order(); ++a) {
    std::vector<int> x = s5.permutation(a);
    int k = 1;
    while (x != s5.permutation(0)) x = then(x, s5.permutation(a)), ++k;
    EXPECT_EQ(s5.element_order(a), k);
    orders.insert(k);
  }
  EXPECT_EQ(orders, (std::set<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(z60.element_order(1), 60);
  EXPECT_EQ(z60.element_order(6), 10);
}

TEST(PermGroup, BuiltinGeneratorsGenerate) {
  // The generating sets used by inputs=generators reach the whole group (closure by brute force).
  for (const char* spec : {"S2", "S3", "S5", "A3", "A4", "A5", "A6", "Z7", "A4xZ5", "Z2xZ2xZ3"}) {
    const PermGroup g = PermGroup::parse(spec);
    std::vector<std::vector<int>> gens;
    for (int32_t x : g.generators()) gens.push_back(g.permutation(x));
    EXPECT_EQ(PermGroup::from_generators(gens, {}, spec).order(), g.order()) << spec;
  }
  const PermGroup s5 = PermGroup::parse("S5");
  ASSERT_EQ(s5.generators().size(), 2u);
  EXPECT_EQ(s5.name(s5.generators()[0]), "(0 1)");
  EXPECT_EQ(s5.name(s5.generators()[1]), "(0 1 2 3 4)");
  EXPECT_EQ(PermGroup::parse("A4xZ5").generators().size(), 3u);
  EXPECT_EQ(PermGroup::parse("S1").generators(), std::vector<int32_t>{0});
}

TEST(PermGroup, YamlClosure) {
  const PermGroup s5 = PermGroup::parse(source_path("experiments/groups/s5_gens.yaml"));
  EXPECT_EQ(s5.order(), 120);
  EXPECT_EQ(s5.name(1), "swap");  // BFS discovery: identity, then the generators in order
  EXPECT_EQ(s5.name(2), "cycle");
  EXPECT_EQ(s5.permutation(2), (std::vector<int>{1, 2, 3, 4, 0}));
  EXPECT_EQ(s5.generators(), (std::vector<int32_t>{1, 2}));
  const PermGroup d4 = PermGroup::parse(source_path("experiments/groups/d4.yaml"));
  EXPECT_EQ(d4.order(), 8);
  EXPECT_FALSE(d4.is_abelian());
  const PermGroup a5 = PermGroup::parse(source_path("experiments/groups/a5_gens.yaml"));
  EXPECT_EQ(a5.order(), 60);
  for (int32_t a = 0; a < a5.order(); ++a) EXPECT_TRUE(a5.is_even(a));
  // Two overlapping 4-rings on 6 cells generate a transitive copy of S5: same element-order counts.
  const PermGroup rings = PermGroup::parse(source_path("experiments/groups/two_rings.yaml"));
  const PermGroup s5_lex = PermGroup::parse("S5");
  EXPECT_EQ(rings.order(), 120);
  std::multiset<int> rings_orders, s5_orders;
  for (int32_t a = 0; a < 120; ++a) {
    rings_orders.insert(rings.element_order(a));
    s5_orders.insert(s5_lex.element_order(a));
  }
  EXPECT_EQ(rings_orders, s5_orders);
  // Without names every element uses cycle notation; points may be omitted.
  const PermGroup z4 = PermGroup::parse(write_tmp("z4.yaml", "generators:\n  - [1, 2, 3, 0]\n"));
  EXPECT_EQ(z4.order(), 4);
  EXPECT_EQ(z4.names(), (std::vector<std::string>{"e", "(0 1 2 3)", "(0 2)(1 3)", "(0 3 2 1)"}));
}

TEST(PermGroup, SpecErrors) {
  expect_error("", "empty group spec");
  expect_error("S0", "S0");
  expect_error("Q8", "Q8");
  expect_error("A4xB2", "B2");
  expect_error("A4x", "A4x");
  expect_error("S", "'S'");
  expect_error("S-3", "S-3");
  expect_error("S1000", "S1000");
  expect_error("S8", "40320");
  expect_error("S99999999999", "S99999999999");
  expect_error("Z65", "65 points");
  expect_error("S5xS5", "14400");
  expect_error("Z40xZ40", "80 points");
}

TEST(PermGroup, YamlErrors) {
  struct Case {
    std::string file, text, mention;
  };
  const std::vector<Case> cases = {
      {"dup.yaml", "generators:\n  - [0, 0, 1]\n", "[0, 0, 1]"},
      {"range.yaml", "generators:\n  - [0, 1, 5]\n", "5"},
      {"negative.yaml", "generators:\n  - [0, -1, 2]\n", "-1"},
      {"length.yaml", "points: 3\ngenerators:\n  - [1, 0, 2, 3]\n", "points is 3"},
      {"lengths.yaml", "generators:\n  - [1, 0, 2]\n  - [1, 0, 2, 3]\n", "[1, 0, 2, 3]"},
      {"bad.yaml", "generators: [[1, 0, 2]\n", "bad YAML"},
      {"key.yaml", "generators:\n  - [1, 0]\ncolour: red\n", "colour"},
      {"none.yaml", "points: 3\n", "generators"},
      {"notint.yaml", "generators:\n  - [1, x, 0]\n", "notint.yaml"},
      {"repeat.yaml", "generators:\n  - [1, 0, 2]\n  - [1, 0, 2]\n", "repeats generator 0"},
      {"names.yaml", "generators:\n  - [1, 0, 2]\nnames: [a, b]\n", "2 names for 1 generators"},
      {"badname.yaml", "generators:\n  - [1, 0, 2]\nnames: [\"(x)\"]\n", "(x)"},
      {"dupname.yaml", "generators:\n  - [1, 0, 2]\n  - [0, 2, 1]\nnames: [a, a]\n", "'a'"},
      {"points.yaml", "points: 65\ngenerators:\n  - [0]\n", "65"},
      {"s8.yaml", "generators:\n  - [1, 0, 2, 3, 4, 5, 6, 7]\n  - [1, 2, 3, 4, 5, 6, 7, 0]\n", "5040"},
  };
  for (const auto& c : cases) {
    const std::string path = write_tmp(c.file, c.text);
    try {
      PermGroup::parse(path);
      ADD_FAILURE() << "no error for " << c.file;
    } catch (const sb::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.mention), std::string::npos) << c.file << ": " << msg;
      EXPECT_NE(msg.find(c.file), std::string::npos) << c.file << " not named: " << msg;
    }
  }
  expect_error(std::string(SB_TEST_TMP) + "/missing.yaml", "missing.yaml");
  expect_error("missing_group.yml", "not found");
}

TEST(PermGroup, DescribeListsElements) {
  const std::string text = PermGroup::parse("S3").describe();
  EXPECT_NE(text.find("(a*b)[i] = b[a[i]]"), std::string::npos);
  EXPECT_NE(text.find("order 6"), std::string::npos);
  EXPECT_NE(text.find("(0 1 2)"), std::string::npos);
  EXPECT_NE(text.find("[1, 2, 0]"), std::string::npos);
  EXPECT_NE(text.find("odd"), std::string::npos);
  EXPECT_NE(text.find("even"), std::string::npos);
}

}  // namespace
