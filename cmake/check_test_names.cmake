# Fails the build of a test program whose test case names CTest cannot carry one to one. Each case
# becomes its own CTest entry (mgpu_doctest), found from the program's --list-test-cases and read
# as a CMake list: a name holding ';' is split into pieces that each select no case and so pass
# without running anything, a '[' or ']' joins the names after it into one, and two cases of one
# name would be one entry running both.
# Run after the link, before the cases are listed: cmake -DPROGRAM=<test program> -P this file.
cmake_minimum_required(VERSION 3.20)
# Listing runs no test, only what runs before main: the global initializers of the program and of
# the chapter code it links. Those are bounded, so a hang there fails the build instead of
# stopping it for good.
execute_process(COMMAND ${PROGRAM} --list-test-cases --no-skip OUTPUT_VARIABLE listing
                ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  get_filename_component(program ${PROGRAM} NAME)
  message(FATAL_ERROR
          "${program} could not list its test cases (${status}). Listing runs only the code that "
          "runs before main, such as a global variable's initializer in a chapter .cpp file: "
          "that code crashed, threw or hung.\n${errors}")
endif()

# The listing as a CMake list of lines, with the characters CMake lists treat specially kept as
# markers.
string(REPLACE ";" "<semicolon>" listing "${listing}")
string(REPLACE "[" "<lbracket>" listing "${listing}")
string(REPLACE "]" "<rbracket>" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(names "")
set(problems "")
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^(<lbracket>doctest<rbracket>|=+$)")
    continue()
  endif()
  string(REPLACE "<semicolon>" ";" shown "${line}")
  string(REPLACE "<lbracket>" "[" shown "${shown}")
  string(REPLACE "<rbracket>" "]" shown "${shown}")
  if(line MATCHES "<semicolon>")
    string(APPEND problems "  \"${shown}\": has ';' (write ',' instead)\n")
  elseif(line MATCHES "<[lr]bracket>")
    string(APPEND problems "  \"${shown}\": has '[' or ']' (write '(' or ')' instead)\n")
  elseif(line IN_LIST names)
    string(APPEND problems "  \"${shown}\": two test cases have this name (rename one)\n")
  endif()
  list(APPEND names "${line}")
endforeach()

if(problems)
  get_filename_component(program ${PROGRAM} NAME)
  message(FATAL_ERROR "${program}: test case names CTest cannot run one to one:\n${problems}")
endif()
