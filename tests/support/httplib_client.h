// cpp-httplib for tests that talk HTTP to a worker's endpoint or a local server. Debian's
// cpp-httplib is a compiled library: its classes match only with the definitions it was built
// with (those src/CMakeLists.txt gives the endpoint), so include it through here.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
