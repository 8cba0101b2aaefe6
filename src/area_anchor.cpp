// Keeps every layer library non-empty while a layer is being written.
namespace {
[[maybe_unused]] int kcl_area_anchor = 0;
}
