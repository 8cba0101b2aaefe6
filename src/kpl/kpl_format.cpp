#include "kpl/kpl_format.h"

#include <cstring>

#include "base/digest.h"

namespace kcl::kpl {

static_assert(base::kMd5Size == kDigestSize);

bool has_magic(std::string_view data) noexcept {
  return data.size() >= kMagic.size() &&
         std::memcmp(data.data(), kMagic.data(), kMagic.size()) == 0;
}

FrameCheck open_frame(std::string_view data, std::string_view& body) noexcept {
  if (data.size() < kMagic.size() + kDigestSize) return FrameCheck::kTooShort;
  const std::string_view protobuf =
      data.substr(kMagic.size(), data.size() - kMagic.size() - kDigestSize);
  const std::string_view digest = data.substr(data.size() - kDigestSize);
  base::Md5Digest md{};
  if (!base::md5(protobuf, md)) return FrameCheck::kNoMd5;
  if (std::memcmp(md.data(), digest.data(), kDigestSize) != 0) return FrameCheck::kMd5Mismatch;
  body = protobuf;
  return FrameCheck::kOk;
}

void append_magic(std::string& out) {
  out.append(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
}

void append_digest(std::string& out) {
  base::Md5Digest md{};
  const std::string_view body(out.data() + kMagic.size(), out.size() - kMagic.size());
  (void)base::md5(body, md);  // without MD5 the aggregate fails its check at the reader
  out.append(reinterpret_cast<const char*>(md.data()), kDigestSize);
}

}  // namespace kcl::kpl
