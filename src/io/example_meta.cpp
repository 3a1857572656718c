// example_meta.cpp: the metadata of a generated example file (see example_meta.hpp).
#include "io/example_meta.hpp"

#include "core/build_info.hpp"
#include "io/json.hpp"

namespace sb {

std::string example_meta_json(const Task& task, const ExampleFileInfo& info) {
  Json params = Json::object();
  for (const auto& [k, v] : info.params) params[k] = v;
  const auto splits = task.splits();
  const SplitSpec& split = splits.at(static_cast<size_t>(task.split_index(info.split)));
  const char* layout = info.format == ExampleFormat::kJsonl ? "one JSON object per line: input_ids, labels, score_mask (T ints each)"
                       : info.format == ExampleFormat::kNpy ? "one int32 array [count, 3, T]; axis 1 = input_ids, labels, score_mask"
                                                            : "input_ids, labels, score_mask: int32 [count, T] each; "
                                                              "vocab: [V] strings; meta: this JSON as a 0-d string";
  const Json j{{"format", "statebench-examples"},
               {"format_version", 1},
               {"layout", layout},
               {"task", info.task},
               {"params", params},
               {"split", info.split},
               {"split_kind", split.eval ? "eval" : "train"},
               {"seed", info.seed},
               {"start", info.start},
               {"count", info.count},
               {"seq_len", task.seq_len()},
               {"vocab_size", task.vocab_size()},
               {"vocab", task.vocab()},
               {"ignore_label", kIgnoreLabel},
               {"arrays",
                {{"input_ids", "token ids in [0, vocab_size); token id i is vocab[i]"},
                 {"labels", "target token ids, or ignore_label where there is no loss"},
                 {"score_mask", "1 where accuracy is reported (always a labelled position), else 0"}}},
               {"details", task.details()},
               {"statebench", {{"version", STATEBENCH_VERSION}, {"commit", build_commit()}}}};
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string example_meta_path(const std::string& data_path) { return data_path + ".meta.json"; }

NpzExtras example_meta_npz_members(const Task& task, const std::string& meta_json) {
  return {{"vocab", npy_unicode(task.vocab())}, {"meta", npy_unicode({meta_json}, true)}};
}

}  // namespace sb
