// bench_presets.hpp: the models `statebench bench train` times, one per study (the single source of
// truth: `bench train --list-presets --json` prints them resolved, with their FLOPs per token and the
// device peak table, for tools/torch_train_bench.py). Each preset is a train config in YAML.
#pragma once
#include <string>
#include <vector>

namespace sb::cli {

struct BenchPreset {
  const char* name;
  const char* study;  // the experiment whose model and batch it is
  const char* yaml;   // a complete train config (task, model, train.batch_size)
};

const std::vector<BenchPreset>& bench_presets();
// sb::Error "--presets: unknown preset 'X' (known: ...)" for a name not in the table.
const BenchPreset& find_bench_preset(const std::string& name);
// Timed when --presets is not given: every preset on cuda; on the CPU the two small ones.
std::vector<std::string> default_bench_presets(bool cuda);
// The attention kinds --attention accepts (model.attention's names); sb::Error naming the bad one.
void check_attention_kinds(const std::vector<std::string>& kinds);

}  // namespace sb::cli
