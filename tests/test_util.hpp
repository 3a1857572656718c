// test_util.hpp: small assertions shared by the test files: the message of the sb::Error an
// action throws, and a substring expectation that prints the whole text on failure.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.hpp"

// The message of the sb::Error f throws, or "<no error>" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
