// test_checkpoint.cpp: checkpoint save/load round trip (bit-exact), and every validation path:
// bad magic, version, truncation at every length class, corruption, scalar type, layout and
// config mismatches. Errors must name the file and never crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "test_util.hpp"

namespace sb {
namespace {

// One directory per test: ctest runs the tests of this file in parallel processes.
std::string tmp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = std::string(SB_TEST_TMP) + "/checkpoint/" + (info ? info->name() : "shared");
  std::filesystem::create_directories(dir);
  return dir;
}

template <class S>
void build(ParamStore<S>& store, int64_t width = 8) {
  store.add("embed", {5, width});
  store.add("layers.0.norm", {width});
  store.add("layers.0.attn.wq", {width, width});
  store.add("head.bias", {3}, false);
  store.finalize();
}

// A model after 3 AdamW steps, so m, v, t and params are all non-trivial.
template <class S>
struct Trained {
  TrainConfig config = parse_config("model: {d_model: 8}\ntrain: {steps: 50, seed: 3}\n");
  ParamStore<S> store;
  std::unique_ptr<AdamW<S>> opt;
  TrainState state{3, {0x0123456789ABCDEFull, 42, ~0ull}};
  Trained() {
    build(store);
    opt = std::make_unique<AdamW<S>>(config.optim, store);
    for (int step = 0; step < 3; ++step) {
      for (const auto& v : store.views())
        for (int64_t i = 0; i < v.numel; ++i) {
          store.params()[v.offset + i] += static_cast<S>(0.01 * std::sin(double(v.offset + i)));
          store.grads()[v.offset + i] = static_cast<S>(std::cos(0.37 * double(v.offset + i) + step));
        }
      opt->step(store, scheduled_lr(config.optim, config.train.steps, step));
    }
  }
};

template <class S>
void expect_bit_equal(const S* a, const S* b, int64_t n) {
  EXPECT_EQ(std::memcmp(a, b, static_cast<size_t>(n) * sizeof(S)), 0);
}

template <class S>
void round_trip() {
  Trained<S> t;
  const std::string path = tmp_dir() + "/rt" + std::to_string(sizeof(S)) + ".ckpt";
  save_checkpoint(path, t.config, t.state, t.store, *t.opt);

  ParamStore<S> store;
  build(store);
  AdamW<S> opt(t.config.optim, store);
  const TrainState state = load_checkpoint(path, t.config, store, &opt);
  EXPECT_EQ(state, t.state);
  EXPECT_EQ(opt.steps_taken(), 3);
  expect_bit_equal(store.params(), t.store.params(), store.size());
  expect_bit_equal(opt.m(), t.opt->m(), store.size());
  expect_bit_equal(opt.v(), t.opt->v(), store.size());

  // Parameters only (evaluation).
  ParamStore<S> eval_store;
  build(eval_store);
  EXPECT_EQ(load_checkpoint<S>(path, t.config, eval_store, nullptr).step, 3);
  expect_bit_equal(eval_store.params(), t.store.params(), store.size());

  // Header info, and the stored config rebuilds an equal config (eval from a checkpoint alone).
  const CheckpointInfo info = read_checkpoint_info(path);
  EXPECT_EQ(info.version, kCheckpointVersion);
  EXPECT_EQ(info.scalar_bytes, sizeof(S));
  EXPECT_EQ(info.state, t.state);
  EXPECT_EQ(info.optimizer_steps, 3);
  EXPECT_EQ(info.num_elements, t.store.size());
  EXPECT_EQ(info.fingerprint, config_fingerprint(t.config));
  EXPECT_EQ(parse_config(info.config_yaml), t.config);

  // Continuing after a load gives bit-identical results to continuing the original.
  for (auto* s : {&store, &t.store})
    for (int64_t i = 0; i < s->size(); ++i) s->grads()[i] = static_cast<S>(0.5 - 0.01 * double(i % 17));
  opt.step(store, 1e-3);
  t.opt->step(t.store, 1e-3);
  expect_bit_equal(store.params(), t.store.params(), store.size());
}

TEST(Checkpoint, RoundTripFloat) { round_trip<float>(); }
TEST(Checkpoint, RoundTripDouble) { round_trip<double>(); }

TEST(Checkpoint, SaveOverwritesAtomicallyAndAllowsNonSemanticChanges) {
  Trained<float> t;
  const std::string path = tmp_dir() + "/overwrite.ckpt";
  save_checkpoint(path, t.config, t.state, t.store, *t.opt);
  t.state.step = 9;
  save_checkpoint(path, t.config, t.state, t.store, *t.opt);
  EXPECT_EQ(read_checkpoint_info(path).state.step, 9);
  for (const auto& e : std::filesystem::directory_iterator(tmp_dir()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();  // no leftovers
  // Resuming with another out_dir / eval cadence is allowed (not part of the fingerprint).
  TrainConfig other = parse_config(to_yaml(t.config), {"out_dir=elsewhere", "train.eval_every=7", "train.threads=1"});
  ParamStore<float> store;
  build(store);
  EXPECT_EQ(load_checkpoint<float>(path, other, store, nullptr).step, 9);
  // Saving into a missing directory fails cleanly.
  EXPECT_CONTAINS(error_of([&] { save_checkpoint(tmp_dir() + "/no/dir/x.ckpt", t.config, t.state, t.store, *t.opt); }),
                  "x.ckpt");
}

TEST(Checkpoint, MismatchesAreErrors) {
  Trained<float> t;
  const std::string path = tmp_dir() + "/mismatch.ckpt";
  save_checkpoint(path, t.config, t.state, t.store, *t.opt);

  ParamStore<float> store;
  build(store);
  const std::vector<float> before(store.params(), store.params() + store.size());
  const TrainConfig changed = parse_config(to_yaml(t.config), {"optim.lr=0.1"});
  EXPECT_CONTAINS(error_of([&] { load_checkpoint<float>(path, changed, store, nullptr); }),
                  "checkpoint '" + path + "': written for a different configuration");
  EXPECT_EQ(std::memcmp(before.data(), store.params(), before.size() * sizeof(float)), 0);  // untouched

  ParamStore<float> other_layout;
  build(other_layout, 4);
  EXPECT_CONTAINS(error_of([&] { load_checkpoint<float>(path, t.config, other_layout, nullptr); }),
                  "parameter layout differs");

  ParamStore<double> dstore;
  build(dstore);
  EXPECT_CONTAINS(error_of([&] { load_checkpoint<double>(path, t.config, dstore, nullptr); }),
                  "holds float32 values but the model uses float64");

  ParamStore<float> unfinished;
  unfinished.add("x", {3});
  EXPECT_CONTAINS(error_of([&] { load_checkpoint<float>(path, t.config, unfinished, nullptr); }), "not finalized");
  EXPECT_CONTAINS(error_of([&] { read_checkpoint_info(tmp_dir() + "/absent.ckpt"); }), "absent.ckpt");
}

TEST(Checkpoint, DamagedFilesAreErrorsNeverCrashes) {
  Trained<float> t;
  const std::string good_path = tmp_dir() + "/good.ckpt";
  save_checkpoint(good_path, t.config, t.state, t.store, *t.opt);
  const std::string good = read_file(good_path);
  const std::string path = tmp_dir() + "/damaged.ckpt";
  auto load_error = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;  // plain write: no fsync per case
    ParamStore<float> store;
    build(store);
    AdamW<float> opt(t.config.optim, store);
    return error_of([&] { load_checkpoint(path, t.config, store, &opt); });
  };

  EXPECT_CONTAINS(load_error(""), "checkpoint '" + path + "': not a statebench checkpoint (bad magic)");
  EXPECT_CONTAINS(load_error("PK\x03\x04 something else entirely"), "bad magic");
  std::string bad = good;
  bad[8] = 2;  // version
  EXPECT_CONTAINS(load_error(bad), "unsupported format version 2 (this build reads version 1)");

  // Truncation at every length: header, stream state, config, tensors, checksum.
  for (size_t len = 8; len < good.size(); len += (len < 96 ? 1 : 61)) {
    const std::string e = load_error(good.substr(0, len));
    EXPECT_CONTAINS(e, "checkpoint '" + path + "'");
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("corrupted") != std::string::npos) << len << ": " << e;
  }
  EXPECT_CONTAINS(load_error(good.substr(0, good.size() - 100)), "truncated");
  EXPECT_CONTAINS(load_error(good + "extra"), "corrupted (size mismatch)");

  // Any flipped byte is caught (checksum or a header check), never a crash.
  for (size_t pos = 8; pos < good.size(); pos += 131) {
    bad = good;
    bad[pos] ^= 0x5A;
    EXPECT_NE(load_error(bad), "<no error>") << pos;
  }
  bad = good;
  bad[good.size() / 2] ^= 1;  // inside the tensors
  EXPECT_CONTAINS(load_error(bad), "corrupted (checksum mismatch)");
  EXPECT_EQ(load_error(good), "<no error>");
}

}  // namespace
}  // namespace sb
