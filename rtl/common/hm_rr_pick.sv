// Round-robin pick among PORTS requesters: `pick` is the first requester after the one last
// granted (combinational, so a grant can be taken in the same cycle); `adv` records the
// pick as the last grant. Shared by the AXI read and write arbiters.
module hm_rr_pick #(
  // Requesters (1..256).
  parameter int PORTS = 4,
  // Index bits (derived).
  localparam int PW = PORTS > 1 ? $clog2(PORTS) : 1
) (
  input  logic             clk,
  input  logic             rst,
  input  logic [PORTS-1:0] req,     // requesters that want a grant
  input  logic             adv,     // the pick is granted this cycle
  output logic             any,     // some requester waits
  output logic [PW-1:0]    pick     // the one to grant
);
  logic [PW-1:0] last_q;
  always_comb begin
    any  = 1'b0;
    pick = last_q;
    for (int k = 1; k <= PORTS; k++) begin
      logic [PW-1:0] p;
      p = PW'((int'(last_q) + k) % PORTS);
      if (!any && req[p]) begin any = 1'b1; pick = p; end
    end
  end
  always_ff @(posedge clk) begin
    if (rst) last_q <= PW'(PORTS - 1);
    else if (adv) last_q <= pick;
  end

  if (PORTS < 1 || PORTS > 256) begin : g_bad_ports
    $error("hm_rr_pick: PORTS must be 1..256");
  end
endmodule
