"""The fixed domain taxonomy every service is labelled with (the paper's Figure 3 kind)."""

DOMAINS = (
  "productivity",  # calendars, documents, drives, notes, meetings
  "communication",  # mail, team chat, messaging
  "sales_crm",  # accounts, contacts, deals, quotes
  "marketing",  # campaigns, audiences, sends, social posting
  "hr",  # employees, time off, recruiting, payroll
  "finance",  # invoices, payments, expenses, ledgers
  "support",  # tickets, help desks, knowledge bases
  "operations",  # inventory, purchasing, shipping, projects, incidents
  "data_analytics",  # warehouses, SQL, dashboards, document stores
  "software_devops",  # repositories, CI, issue trackers, cloud
  "social_media",  # forums, social networks, communities
  "location_travel",  # maps, places, weather, travel
  "knowledge_search",  # web search, encyclopedias, news, research
)

#: The six business functions of AutomationBench, used to label tasks.
BUSINESS_FUNCTIONS = ("sales", "marketing", "hr", "finance", "support", "operations")
