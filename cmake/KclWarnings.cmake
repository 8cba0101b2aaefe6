# kcl_set_warnings(target): the project's warning set; errors when KCL_WERROR is on.
function(kcl_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wimplicit-fallthrough)
  if(KCL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
