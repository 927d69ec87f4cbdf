// main.cpp — the Catch2 entry point.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
