# Included by llama.cpp's CMake build (CMAKE_PROJECT_INCLUDE, after each project() call): the
# targets that hold no model arithmetic compile at KVEVAL_GLUE_OPT instead of the build type's
# -O3: llama (loading, tokenizer, graph building, sampling), and what only llama-server needs
# (llama-common, mtmd, the server, its HTTP library). The forward pass runs in ggml's
# libraries, which keep -O3. A target's own options come after the build type's, and GCC and
# Clang take the last -O given. Measured on 2 cores (bench/glue_opt.py): the same answers at
# the same speed, and a third less compiling.
if(PROJECT_NAME STREQUAL "llama.cpp" AND KVEVAL_GLUE_OPT)
    function(kveval_glue_flags)
        foreach(target llama llama-common mtmd server-context llama-server-impl llama-server
                cpp-httplib)
            if(TARGET ${target})
                target_compile_options(${target} PRIVATE ${KVEVAL_GLUE_OPT})
            endif()
        endforeach()
    endfunction()
    cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL kveval_glue_flags)
endif()
