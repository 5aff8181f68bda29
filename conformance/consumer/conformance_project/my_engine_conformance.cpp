// Every ringkv property and golden case as this project's tests (ringkv/conformance/gtest.hpp).
#include <ringkv/conformance/gtest.hpp>

#include "my_engine.hpp"

#ifndef MY_ENGINE_WINDOW_BUG
RINGKV_CONFORMANCE_TESTS(MyEngine, my_engine_factory(false));
#else
RINGKV_CONFORMANCE_TESTS(MyBuggyEngine, my_engine_factory(true));
#endif
