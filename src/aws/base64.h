// Base64 (RFC 4648, standard alphabet, with padding) as the AWS JSON protocols use it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kcl/status.h"

namespace kcl::aws {

std::string base64_encode(std::string_view bytes);
// Appends the encoding of `bytes` to `out` (one resize, no temporary).
void base64_encode_append(std::string_view bytes, std::string& out);
// The characters the encoding of `n` bytes takes.
constexpr std::size_t base64_encoded_size(std::size_t n) { return (n + 2) / 3 * 4; }
// Writes the encoding of `bytes` to dst, which has room for base64_encoded_size(bytes.size())
// characters, and returns the end of it. Writes nothing beyond that room.
char* base64_encode_to(std::string_view bytes, char* dst);
// Appends the decoded bytes to `out`. Returns false on invalid input (bad character, bad
// length or bad padding); `out` is then left with unspecified extra bytes.
bool base64_decode_append(std::string_view text, std::string& out);
// Decodes `text` to `dst`, which has room for text.size() / 4 * 3 bytes and either does not
// overlap `text` or starts at or before text.data() (decoding in place: the output never
// overtakes the input). Sets `written`; returns false on invalid input (then `dst` holds
// unspecified bytes, and so does `text` when decoding in place).
bool base64_decode_to(std::string_view text, char* dst, std::size_t& written);
// Decodes text[0, n) over itself (the bytes start at `text`). Returns false on invalid
// input and then leaves text[0, n) exactly as it was: a caller can try this first and look
// at the text again only when it fails (a JSON escape in it, say), instead of scanning every
// text before decoding it.
bool base64_decode_in_place(char* text, std::size_t n, std::size_t& written);

// The vector kernels the encoder and the decoder choose from at run time (the widest this
// CPU runs: 64 characters a step with AVX-512 VBMI, 32 with AVX2, else one group at a time).
// Every kernel gives the same characters, bytes and verdicts; tests run each one the CPU
// supports.
enum class Base64Kernel { kScalar, kAvx2, kAvx512Vbmi };
bool base64_kernel_supported(Base64Kernel kernel);
// base64_encode_to with the given kernel (one the CPU supports).
char* base64_encode_to_with(Base64Kernel kernel, std::string_view bytes, char* dst);
// base64_decode_in_place with the given kernel (one the CPU supports).
bool base64_decode_in_place_with(Base64Kernel kernel, char* text, std::size_t n,
                                 std::size_t& written);

// Errors: kInvalidArgument naming the offending position.
Result<std::string> base64_decode(std::string_view text);

}  // namespace kcl::aws
