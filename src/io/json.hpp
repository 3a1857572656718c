// json.hpp: the project's JSON value (nlohmann::ordered_json: objects keep their keys in the order
// written) and what every JSON reader shares: parsing text with a one-line error, and lenient field
// readers that name the field when a value has the wrong type. Writers use the value's dump().
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sb {

using Json = nlohmann::ordered_json;

// Parses `text`; sb::Error "not valid JSON (line L, column C: why)" otherwise.
Json parse_json(const std::string& text);

// The value of `key` in `object`; nullptr when absent or `object` is not an object.
const Json* json_field(const Json& object, const char* key);

// Readers for one value; `what` names it in errors ("'model.n_layers': expected an integer, got
// \"two\""). Numbers may also be given as numeric strings ("64").
std::string json_text(const Json& value);                          // a string as is, null as "", else dump()
std::string json_string(const Json& value, const std::string& what);  // a string (null: ""); else sb::Error
double json_number(const Json& value, const std::string& what);    // null: NaN
int64_t json_integer(const Json& value, const std::string& what);  // an integral number

// A double as JSON: null when not finite, an integer when integral ("1", not "1.0", as the files
// have always been written), else its shortest round-trip form ("0.0003", "1e-20").
Json json_number_value(double v);

}  // namespace sb
