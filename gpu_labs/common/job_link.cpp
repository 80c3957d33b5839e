// The job's host link over TCP (a star through rank 0) or files; see job_link.hpp.
#include "common/job_link.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mgpu::gpu {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// A vector of strings as one string and back: count, then each length and its bytes.
std::string pack(const std::vector<std::string>& parts) {
  std::string out = std::to_string(parts.size()) + "\n";
  for (const std::string& p : parts) out += std::to_string(p.size()) + "\n" + p;
  return out;
}

std::vector<std::string> unpack(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  in >> n;
  in.get();
  std::vector<std::string> out(n);
  for (std::string& s : out) {
    std::size_t len = 0;
    in >> len;
    in.get();
    s.resize(len);
    in.read(s.data(), static_cast<std::streamsize>(len));
  }
  if (!in) throw std::runtime_error("job link: a malformed message from rank 0");
  return out;
}

// ---- TCP --------------------------------------------------------------------------------------
// Frames: one type byte ('D' data, 'E' error, 'H' hello), four length bytes, the payload.

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is readable (or writable) or the deadline passes; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR)
      throw std::runtime_error(std::string("job link: poll: ") + std::strerror(errno));
  }
}

void send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("job link: send: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
}

void send_frame(int fd, char type, const std::string& payload) {
  const auto len = static_cast<std::uint32_t>(payload.size());
  std::string f(1, type);
  for (int s = 24; s >= 0; s -= 8) f.push_back(static_cast<char>((len >> s) & 0xff));
  send_all(fd, f + payload);
}

// Reads exactly n bytes; false on end of stream; throws on timeout.
bool recv_exact(int fd, char* p, std::size_t n, Clock::time_point deadline,
                const std::string& timeout_msg) {
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) throw std::runtime_error(timeout_msg);
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// One frame, or type '\0' when the other side closed.
std::pair<char, std::string> recv_frame(int fd, Clock::time_point deadline,
                                        const std::string& timeout_msg) {
  char head[5];
  if (!recv_exact(fd, head, 5, deadline, timeout_msg)) return {'\0', ""};
  std::uint32_t len = 0;
  for (int i = 1; i < 5; ++i) len = (len << 8) | static_cast<unsigned char>(head[i]);
  if (len > (64u << 20))
    throw std::runtime_error("job link: a frame of " + std::to_string(len) + " bytes");
  std::string payload(len, '\0');
  if (!recv_exact(fd, payload.data(), len, deadline, timeout_msg)) return {'\0', ""};
  return {head[0], payload};
}

class TcpLink final : public JobLink {
 public:
  explicit TcpLink(const Launch& l)
      : l_(l), where_("tcp " + l.address + ":" + std::to_string(l.port)) {
    deadline_ = Clock::now() + std::chrono::seconds(l.timeout_s);
    if (l.rank == 0) {
      listen_and_accept();
    } else {
      connect_to_root();
    }
  }

  std::vector<std::string> exchange(const std::string& mine, const std::string& what) override {
    const auto deadline = Clock::now() + std::chrono::seconds(l_.timeout_s);
    if (l_.rank != 0) {
      send_frame(root_.fd(), 'D', mine);
      // Rank 0 answers within its own timeout, naming whoever is missing; a little longer here
      // so that its message, not a bare timeout, is what this rank reports.
      const auto [type, payload] =
          recv_frame(root_.fd(), deadline + std::chrono::seconds(5),
                     "rank " + std::to_string(l_.rank) + " waited " + std::to_string(l_.timeout_s) +
                         " s for rank 0 in " + what + " (" + where_ + ")");
      if (type == 'E') throw std::runtime_error(payload);
      if (type != 'D')
        throw std::runtime_error("rank 0 left the job during " + what + " (" + where_ +
                                 "): see rank 0's error");
      return unpack(payload);
    }
    std::vector<std::string> all(static_cast<std::size_t>(l_.world));
    all[0] = mine;
    std::vector<bool> have(static_cast<std::size_t>(l_.world), false);
    have[0] = true;
    try {
      for (;;) {
        std::vector<int> missing;
        std::vector<pollfd> fds;
        for (int r = 1; r < l_.world; ++r) {
          if (have[static_cast<std::size_t>(r)]) continue;
          missing.push_back(r);
          fds.push_back({peers_[static_cast<std::size_t>(r)].fd(), POLLIN, 0});
        }
        if (missing.empty()) break;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
          fail(rank_list(missing) + " did not reach " + what + " within " +
               std::to_string(l_.timeout_s) + " s (the others did): look at " +
               (missing.size() == 1 ? "its" : "their") + " output");
        }
        if (::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 1000))) <= 0)
          continue;
        for (std::size_t i = 0; i < fds.size(); ++i) {
          if (fds[i].revents == 0) continue;
          const int r = missing[i];
          const auto [type, payload] =
              recv_frame(fds[i].fd, deadline,
                         "rank 0: rank " + std::to_string(r) + " sent half a message in " + what);
          if (type != 'D')
            fail("rank " + std::to_string(r) + " left the job before " + what +
                 " (its process ended or failed)");
          all[static_cast<std::size_t>(r)] = payload;
          have[static_cast<std::size_t>(r)] = true;
        }
      }
    } catch (const std::exception& e) {
      fail(e.what());
    }
    const std::string packed = pack(all);
    for (int r = 1; r < l_.world; ++r) {
      try {
        send_frame(peers_[static_cast<std::size_t>(r)].fd(), 'D', packed);
      } catch (const std::exception&) {
        fail("rank " + std::to_string(r) + " left the job during " + what);
      }
    }
    return all;
  }

 private:
  // Tells every connected rank why the job stops, then throws the same message here.
  [[noreturn]] void fail(const std::string& why) {
    const std::string msg = "rank 0: " + why + " (" + where_ + ", job " + l_.job_key + ")";
    for (const Socket& s : peers_) {
      if (s.fd() < 0) continue;
      try {
        send_frame(s.fd(), 'E', msg);
      } catch (const std::exception&) {
      }
    }
    throw std::runtime_error(msg);
  }

  void listen_and_accept() {
    Socket ls(::socket(AF_INET, SOCK_STREAM, 0));
    if (ls.fd() < 0)
      throw std::runtime_error(std::string("rank 0: socket: ") + std::strerror(errno));
    const int one = 1;
    ::setsockopt(ls.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<std::uint16_t>(l_.port));
    if (::bind(ls.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(ls.fd(), 128) != 0) {
      throw std::runtime_error(
          "rank 0 cannot listen on port " + std::to_string(l_.port) + ": " + std::strerror(errno) +
          ": pick a free port (MGPU_RENDEZVOUS_PORT, or MASTER_PORT whose next port is used)");
    }
    peers_.resize(static_cast<std::size_t>(l_.world));
    int joined = 1;
    while (joined < l_.world) {
      if (!wait_fd(ls.fd(), POLLIN, deadline_)) {
        std::vector<int> missing;
        for (int r = 1; r < l_.world; ++r)
          if (peers_[static_cast<std::size_t>(r)].fd() < 0) missing.push_back(r);
        fail(rank_list(missing) + " of " + std::to_string(l_.world) + " did not join within " +
             std::to_string(l_.timeout_s) +
             " s: is it running, with the same MASTER_ADDR and MASTER_PORT? "
             "(MGPU_INIT_TIMEOUT sets the wait)");
      }
      Socket s(::accept(ls.fd(), nullptr, nullptr));
      if (s.fd() < 0) continue;
      std::pair<char, std::string> hello;
      try {
        hello = recv_frame(s.fd(), Clock::now() + std::chrono::seconds(10), "hello");
      } catch (const std::exception&) {
        continue;  // not one of ours: something else probing the port
      }
      if (hello.first != 'H') continue;
      std::istringstream in(hello.second);
      std::string key;
      int world = 0, rank = -1;
      std::getline(in, key);
      in >> world >> rank;
      std::string refuse;
      if (key != l_.job_key) {
        refuse = "rank " + std::to_string(rank) + " belongs to job " + key + ", not to " +
                 l_.job_key + ": two jobs share " + where_ + "; give each its own MASTER_PORT";
      } else if (world != l_.world) {
        refuse = "rank " + std::to_string(rank) + " says the world has " + std::to_string(world) +
                 " ranks, rank 0 says " + std::to_string(l_.world) +
                 ": start every rank with the same world size";
      } else if (rank < 1 || rank >= l_.world || peers_[static_cast<std::size_t>(rank)].fd() >= 0) {
        refuse = "rank " + std::to_string(rank) +
                 " joined twice or is out of range: every process needs its own rank";
      }
      if (!refuse.empty()) {
        std::fprintf(stderr, "rank 0: refused a connection: %s\n", refuse.c_str());
        try {
          send_frame(s.fd(), 'E', "rank 0 refused this rank: " + refuse);
        } catch (const std::exception&) {
        }
        continue;
      }
      peers_[static_cast<std::size_t>(rank)] = std::move(s);
      ++joined;
    }
  }

  void connect_to_root() {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc =
        ::getaddrinfo(l_.address.c_str(), std::to_string(l_.port).c_str(), &hints, &found);
    if (rc != 0) {
      throw std::runtime_error("rank " + std::to_string(l_.rank) + " cannot resolve MASTER_ADDR " +
                               l_.address + ": " + ::gai_strerror(rc));
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
    // Rank 0 may start later than this rank: try again until the timeout.
    std::string last = "no attempt";
    while (Clock::now() < deadline_) {
      Socket s(::socket(AF_INET, SOCK_STREAM, 0));
      if (::connect(s.fd(), found->ai_addr, found->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        send_frame(s.fd(), 'H',
                   l_.job_key + "\n" + std::to_string(l_.world) + " " + std::to_string(l_.rank));
        root_ = std::move(s);
        return;
      }
      last = std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("rank " + std::to_string(l_.rank) + " could not reach rank 0 at " +
                             where_ + " within " + std::to_string(l_.timeout_s) + " s (" + last +
                             "): is rank 0 running, and is MASTER_ADDR its host?");
  }

  Launch l_;
  std::string where_;
  Clock::time_point deadline_;
  Socket root_;                // ranks > 0: the connection to rank 0
  std::vector<Socket> peers_;  // rank 0: one per other rank
};

// ---- files ------------------------------------------------------------------------------------
// Round k's part of rank r is the file <dir>/mgpu-<key>.<k>.<r>, written whole (a rename). A file
// is taken only if it names this job and world and is younger than this process's start less the
// timeout: an older one is a crashed earlier run's with the same key (a requeued Slurm job), since
// a live rank 0 would have given up on this rank by then. Rank 0 removes the job's files at exit.

class FileLink final : public JobLink {
 public:
  explicit FileLink(const Launch& l) : l_(l), started_(fs::file_time_type::clock::now()) {
    std::string key = l.job_key;
    for (char& c : key)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
    prefix_ = "mgpu-" + key + ".";
    std::error_code ec;
    fs::create_directories(l.dir, ec);
    if (!fs::is_directory(l.dir)) {
      throw std::runtime_error(
          "rank " + std::to_string(l.rank) + " cannot use the rendezvous folder " + l.dir +
          ": create it on a file system every node sees, or set MGPU_RENDEZVOUS_DIR");
    }
  }
  ~FileLink() override {
    std::error_code ec;
    if (l_.rank != 0) {
      write(path("left", l_.rank), "");
      return;
    }
    // Wait briefly for every rank to have read the last round, then remove everything.
    const auto until = Clock::now() + std::chrono::seconds(std::min(l_.timeout_s, 10));
    for (int r = 1; r < l_.world; ++r)
      while (!fresh(path("left", r)) && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const auto& e : fs::directory_iterator(l_.dir, ec))
      if (e.path().filename().string().rfind(prefix_, 0) == 0) fs::remove(e.path(), ec);
  }

  std::vector<std::string> exchange(const std::string& mine, const std::string& what) override {
    const std::string round = std::to_string(round_++);
    write(path(round, l_.rank), mine);
    std::vector<std::string> all(static_cast<std::size_t>(l_.world));
    std::vector<bool> have(static_cast<std::size_t>(l_.world), false);
    const auto deadline = Clock::now() + std::chrono::seconds(l_.timeout_s);
    for (;;) {
      std::vector<int> missing;
      for (int r = 0; r < l_.world; ++r) {
        if (have[static_cast<std::size_t>(r)]) continue;
        if (auto got = read(path(round, r))) {
          all[static_cast<std::size_t>(r)] = *got;
          have[static_cast<std::size_t>(r)] = true;
        } else {
          missing.push_back(r);
        }
      }
      if (missing.empty()) return all;
      if (Clock::now() > deadline) {
        throw std::runtime_error("rank " + std::to_string(l_.rank) + ": " + rank_list(missing) +
                                 " of " + std::to_string(l_.world) + " did not reach " + what +
                                 " within " + std::to_string(l_.timeout_s) + " s (files " +
                                 path(round, -1) + "<rank>, job " + l_.job_key +
                                 "): is it running, and does it see " + l_.dir +
                                 "? (MGPU_INIT_TIMEOUT sets the wait)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string path(const std::string& round, int rank) const {
    return (fs::path(l_.dir) / (prefix_ + round + "." + (rank >= 0 ? std::to_string(rank) : "")))
        .string();
  }
  std::string header() const {
    return "mgpu-job " + l_.job_key + " " + std::to_string(l_.world) + "\n";
  }

  bool fresh(const std::string& p) const {
    std::error_code ec;
    const auto t = fs::last_write_time(p, ec);
    return !ec && t >= started_ - std::chrono::seconds(l_.timeout_s);
  }

  void write(const std::string& p, const std::string& body) const {
    const std::string tmp = p + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      out << header() << body;
      if (!out)
        throw std::runtime_error("rank " + std::to_string(l_.rank) + " cannot write " + tmp);
    }
    fs::rename(tmp, p);
  }

  std::optional<std::string> read(const std::string& p) const {
    if (!fresh(p)) return std::nullopt;
    std::ifstream in(p, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string h = header();
    if (text.compare(0, h.size(), h) != 0)
      return std::nullopt;  // another job's, or a world that disagrees
    return text.substr(h.size());
  }

  Launch l_;
  fs::file_time_type started_;
  std::string prefix_;
  unsigned round_ = 0;
};

std::unique_ptr<JobLink>& process_link() {
  static std::unique_ptr<JobLink> link;
  return link;
}
int& process_rank() {
  static int rank = 0;
  return rank;
}

}  // namespace

std::vector<std::string> JobLink::all_gather(const std::string& mine, const std::string& what) {
  if (!broken_.empty()) throw std::runtime_error(broken_);
  try {
    return exchange(mine, what);
  } catch (const std::exception& e) {
    broken_ = e.what();
    throw;
  }
}

std::unique_ptr<JobLink> connect_job(const Launch& launch) {
  switch (launch.bootstrap) {
    case Bootstrap::tcp:
      return std::make_unique<TcpLink>(launch);
    case Bootstrap::file:
      return std::make_unique<FileLink>(launch);
    case Bootstrap::none:
    case Bootstrap::nccl_env:
      break;
  }
  return nullptr;
}

JobLink* join_job(const Launch& launch) {
  if (!process_link()) {
    process_link() = connect_job(launch);
    process_rank() = launch.rank;
  }
  return process_link().get();
}

JobLink* joined_job() { return process_link().get(); }

std::string share_from_rank0(JobLink& link, int rank, const std::function<std::string()>& make) {
  return link.all_gather(rank == 0 ? make() : std::string(), "the start (sharing rank 0's id)")[0];
}

int agree_exit_status(int code) noexcept {
  JobLink* link = joined_job();
  if (link == nullptr) return code;
  std::vector<std::string> all;
  try {
    all = link->all_gather(std::to_string(code), "the end (agreeing on the exit status)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "job: the ranks could not agree on the exit status: %s\n", e.what());
    return std::max(code, 1);
  }
  int worst = code;
  std::string failed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const int c = std::atoi(all[r].c_str());
    worst = std::max(worst, c);
    if (c != 0)
      failed += (failed.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " exit " + all[r]);
  }
  if (process_rank() == 0 && !failed.empty())
    std::fprintf(stderr, "job: %s; every rank exits %d\n", failed.c_str(), worst);
  return worst;
}

}  // namespace mgpu::gpu
