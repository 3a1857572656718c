// study_labels.hpp: names a loaded study's runs (called by load_study, results.cpp). Fills the
// attention, depth, length and learning rate a pending run lacks when every other run agrees; gives a
// run without results the settings its finished siblings derive (head_dim); finds the settings that
// take one value per train length (Study::length_keys); sets RunRecord::model and Study::models.
#pragma once
#include "report/results.hpp"

namespace sb::report {

void label_study(Study& study);

}  // namespace sb::report
