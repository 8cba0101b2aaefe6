// aws/json_text.h: JSON string text written straight into a caller's buffer (request bodies
// and output lines built without a JSON document): the escaped size is worked out first, so
// a caller sizes its buffer once and writes through a pointer.
//
// Escapes: \" \\ \n \r \t, and \u00XX for the other control characters; every other byte is
// copied as it is, so the text is valid JSON when the input is valid UTF-8 (check with
// is_valid_utf8 where the input comes from a user).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kcl::aws {

// The characters `s` takes between the quotes of a JSON string.
std::size_t json_escaped_size(std::string_view s);
// Writes `s` as a JSON string, quotes included, at `p`, which has room for `escaped` + 2
// characters, `escaped` being json_escaped_size(s); returns the end.
char* write_json_string(char* p, std::string_view s, std::size_t escaped);
// Appends `s` as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view s);
// Whether `s` is valid UTF-8 (what a JSON request may carry).
bool is_valid_utf8(std::string_view s);

}  // namespace kcl::aws
